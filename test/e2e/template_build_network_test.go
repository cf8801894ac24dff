package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/network/fakenet"
)

// TestTemplateBuildNetwork builds templates with `warren template build
// --file` on a daemon whose sandbox network is a fake internet
// (networkDaemon: nothing leaves the machine) started with
// --template-build-internet: a build that says nothing reaches the
// internet but not the host, one whose network allows one
// server reaches only it, one with allowInternetAccess false has only
// loopback, and a malformed network is refused before anything runs.
func TestTemplateBuildNetwork(t *testing.T) {
	t.Parallel()
	d, _, _ := networkDaemon(t, "--template-build-internet")
	dir := t.TempDir()
	srv := fakenet.Servers
	// probe records in the template whether the build reached addr's HTTP
	// server ("hello from ..." or the failure's exit code).
	probe := func(addr, file string) string {
		return fmt.Sprintf(`{"type": "RUN", "args": ["timeout 10 wget -q -O - http://%s/ > %s 2>/dev/null; echo \"exit $?\" >> %s"]}`, addr, file, file)
	}
	build := func(name, network string, flags []string, steps ...string) string {
		t.Helper()
		spec := `{"fromTemplate": "bb"` + network + `, "steps": [{"type": "USER", "args": ["root"]}, ` + strings.Join(steps, ", ") + `]}`
		file := filepath.Join(dir, name+".json")
		if err := os.WriteFile(file, []byte(spec), 0o644); err != nil {
			t.Fatal(err)
		}
		out, logs, code := d.cli("", append([]string{"template", "build", name, "--file", file}, flags...)...)
		if code != 0 {
			t.Fatalf("build %s: exit %d\n%s\n%s", name, code, out, logs)
		}
		return logs
	}
	ctx := context.Background()
	c := d.client()
	read := func(template string, files ...string) map[string]string {
		t.Helper()
		sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: template})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Sandboxes.Delete(ctx, sb.SandboxID)
		got := map[string]string{}
		for _, f := range files {
			res, err := c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Cmd: []string{"cat", f}, User: "root"})
			if err != nil {
				t.Fatal(err)
			}
			got[f] = strings.TrimSpace(res.Stdout)
		}
		return got
	}

	// The default: the internet, but not the host nor the bridge.
	hostProbe := fmt.Sprintf(`{"type": "RUN", "args": ["nc -w 3 %s %d </dev/null > /host 2>&1; echo \"exit $?\" >> /host; nc -w 3 10.88.0.1 %d </dev/null >> /host 2>&1; echo \"exit $?\" >> /host"]}`,
		fakenet.HostUplink, fakenet.HostPort, fakenet.HostPort)
	logs := build("net-default", "", nil, probe(srv[0], "/srv0"), hostProbe)
	if !regexp.MustCompile(`started from bb on the native runtime; network: internet\n`).MatchString(logs) {
		t.Errorf("the default build's log does not say it had the internet:\n%s", logs)
	}
	got := read("net-default", "/srv0", "/host")
	if got["/srv0"] != "hello from "+srv[0]+"\nexit 0" {
		t.Errorf("a default build fetching %s: %q", srv[0], got["/srv0"])
	}
	t.Logf("the default build probing the host: %q", got["/host"])
	if strings.Contains(got["/host"], "hello") || strings.Contains(got["/host"], "exit 0") {
		t.Errorf("a build reached the host: %q", got["/host"])
	}

	// Only one server allowed.
	logs = build("net-one", `, "network": {"allowOut": ["`+srv[1]+`"], "denyOut": ["0.0.0.0/0"]}`, nil, probe(srv[1], "/srv1"), probe(srv[0], "/srv0"))
	if !strings.Contains(logs, "network: internet; allow "+srv[1]+"; deny 0.0.0.0/0") {
		t.Errorf("the allow-one build's log:\n%s", logs)
	}
	got = read("net-one", "/srv1", "/srv0")
	if got["/srv1"] != "hello from "+srv[1]+"\nexit 0" || strings.Contains(got["/srv0"], "hello") || got["/srv0"] == "exit 0" {
		t.Errorf("a build allowed only %s: %q", srv[1], got)
	}

	// No network: loopback only (the CLI's flag; the file's field is the
	// same: the flag replaces it).
	logs = build("net-none", `, "allowInternetAccess": true`, []string{"--internet=false"}, probe(srv[0], "/srv0"), `{"type": "RUN", "args": ["ls /sys/class/net > /ifs"]}`)
	if !strings.Contains(logs, "network: none (loopback only)") {
		t.Errorf("the no-network build's log:\n%s", logs)
	}
	got = read("net-none", "/srv0", "/ifs")
	if strings.Contains(got["/srv0"], "hello") || got["/srv0"] == "exit 0" || got["/ifs"] != "lo" {
		t.Errorf("a build without a network: %q", got)
	}

	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"fromTemplate": "bb", "network": {"allowOut": ["not a/cidr"]}, "steps": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := d.cli("", "template", "build", "net-bad", "--file", bad); code == 0 || !strings.Contains(errOut, "network") {
		t.Errorf("a malformed build network: exit %d, %s", code, errOut)
	}
}
