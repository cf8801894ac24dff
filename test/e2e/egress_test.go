package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/network/fakenet"
)

// secretsDaemon is a daemon on a fake internet with HTTPS upstreams whose
// CA the egress proxy trusts, and the base template (curl, python3).
func secretsDaemon(t *testing.T) (*daemon, *fakenet.Internet, string) {
	t.Helper()
	dir := t.TempDir()
	in, err := fakenet.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(dir, "run")
	t.Cleanup(func() {
		if err := fakenet.UnmountUnder(runDir); err != nil {
			t.Errorf("unmount the network run dir: %v", err)
		}
		if err := in.Close(); err != nil {
			t.Errorf("remove the fake internet: %v", err)
		}
	})
	caPath := mustHTTPS(t, in, dir)
	d := newDaemon(t, "--network-netns", in.HostNS, "--network-uplink", fakenet.UplinkName, "--network-dns", fakenet.UpstreamDNS,
		"--network-run-dir", runDir, "--network-subnet", "10.88.0.0/24", "--egress-extra-roots", caPath)
	d.start()
	d.mustCLI("template", "build", "base", "--debootstrap", "bookworm", "--data-dir", d.dataDir)
	return d, in, caPath
}

// TestEgressSecrets drives secrets and network rules end to end: curl and
// Python's urllib in a sandbox reach an HTTPS upstream that sees the
// secret's value while the sandbox only ever holds its placeholder; a host
// outside the secret's allowedHosts is refused and audited; a host without
// rules gets the sandbox's own TLS; an update reaches the next request, a
// delete stops the placeholder resolving, plain HTTP never carries one.
func TestEgressSecrets(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the base template by debootstrap (minutes): not in -short mode")
	}
	d, _, caPath := secretsDaemon(t)
	c := d.client()
	ctx := ctxT(t, 10*time.Minute)
	const value = "sk-test-5f1c0a9e7d3b42c8a6e1"
	out, errOut, code := d.cli(value+"\n", "secret", "create", "tok", "--allow-host", "allowed.example")
	if code != 0 || !strings.Contains(out, "${e2b.secrets.tok}") {
		t.Fatalf("secret create: %d %q %q", code, out, errOut)
	}
	if strings.Contains(out+errOut, value) {
		t.Fatal("secret create printed the value")
	}
	auth := client.NetworkRule{Transform: &client.NetworkTransform{Headers: map[string]string{"Authorization": "Bearer " + client.Placeholder("tok")}}}
	probe := client.NetworkRule{Transform: &client.NetworkTransform{Headers: map[string]string{"X-Probe": "set by a rule"}}}
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "base", EnvVars: map[string]string{"TOKEN": client.Placeholder("tok")},
		Network: &client.Network{AllowOut: []string{"allowed.example", "denied.example", "other.example"}, DenyOut: []string{"0.0.0.0/0"},
			Rules: map[string][]client.NetworkRule{"allowed.example": {auth}, "denied.example": {probe}}}})
	if err != nil {
		t.Fatal(err)
	}
	s := sandboxNet{t, c, ctx, sb.SandboxID}

	// curl, with the rule's header, through the system bundle.
	res := s.run("curl -sS https://allowed.example/")
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "Authorization: Bearer "+value) {
		t.Fatalf("curl to a host with rules: %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	// Python's urllib, sending the placeholder from its environment in a
	// header of its own.
	py := `python3 -c 'import os,urllib.request as u; print(u.urlopen(u.Request("https://allowed.example/", headers={"X-Key": os.environ["TOKEN"]})).read().decode())'`
	res = s.run(py)
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "X-Key: "+value) {
		t.Fatalf("python urllib: %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	// What the sandbox can read holds the placeholder only.
	// (The value is looked for in two halves, so that the command line,
	// which the sandbox log records, does not hold it.)
	half := len(value) / 2
	res = s.run(`v="` + value[:half] + `"; v="${v}` + value[half:] + `"; env | grep ^TOKEN=; cat /proc/*/environ 2>/dev/null | tr '\0' '\n' | grep -c "$v"; ` +
		`grep -rlsF --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev "$v" / | head -3`)
	if !strings.Contains(res.Stdout, "TOKEN=${e2b.secrets.tok}") || strings.Count(res.Stdout, "\n") != 2 || !strings.Contains(res.Stdout, "\n0\n") {
		t.Fatalf("the sandbox can read the value or lacks the placeholder: %q %q", res.Stdout, res.Stderr)
	}

	// Outside allowedHosts: refused, audited; the upstream never sees it.
	res = s.run(`curl -sS -H "X-Key: $TOKEN" -w '%{http_code}' https://denied.example/`)
	if !strings.HasSuffix(res.Stdout, "403") || strings.Contains(res.Stdout, "upstream") {
		t.Fatalf("a placeholder to a host outside allowedHosts: %q %q", res.Stdout, res.Stderr)
	}
	// Plain HTTP never carries a secret.
	res = s.run(`curl -sS -w '%{http_code}' http://allowed.example/`)
	if !strings.HasSuffix(res.Stdout, "403") || !strings.Contains(res.Stdout, "plain HTTP") {
		t.Fatalf("plain HTTP with a secret: %q %q", res.Stdout, res.Stderr)
	}
	// A host without rules: spliced, so the sandbox sees the upstream's
	// own certificate (trusting only the upstream's CA works) and the
	// request arrives untouched.
	if _, err := c.Files.Write(ctx, sb.SandboxID, "/tmp/upstream-ca.pem", bytes.NewReader(mustRead(t, caPath)), 0o644, "root"); err != nil {
		t.Fatal(err)
	}
	res = s.run(`curl -sS --cacert /tmp/upstream-ca.pem -H "X-Key: $TOKEN" https://other.example/`)
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "X-Key: ${e2b.secrets.tok}") {
		t.Fatalf("a host without rules: %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	// ... whereas a host with rules is answered with warren's leaf.
	if res = s.run(`curl -sS --cacert /tmp/upstream-ca.pem https://allowed.example/`); res.ExitCode == 0 {
		t.Fatalf("an intercepted host verified against the upstream's CA alone: %q", res.Stdout)
	}

	// A new version reaches the next request.
	if _, errOut, code := d.cli("sk-rotated-2\n", "secret", "update", "tok"); code != 0 {
		t.Fatalf("secret update: %s", errOut)
	}
	if res = s.run("curl -sS https://allowed.example/"); !strings.Contains(res.Stdout, "Authorization: Bearer sk-rotated-2") {
		t.Fatalf("after an update: %q %q", res.Stdout, res.Stderr)
	}
	// A deleted secret no longer resolves.
	d.mustCLI("secret", "rm", "tok")
	if res = s.run(`curl -sS -w '%{http_code}' https://allowed.example/`); !strings.HasSuffix(res.Stdout, "403") || strings.Contains(res.Stdout, "sk-") {
		t.Fatalf("after a delete: %q %q", res.Stdout, res.Stderr)
	}

	// The uses and refusals are in the sandbox's events, without values.
	evs := d.mustCLI("sandbox", "events", sb.SandboxID)
	for _, want := range []string{"secret-used", "secret tok version 1 to allowed.example", "secret-refused",
		"secret tok version 1 to denied.example: host not in allowedHosts", "plain HTTP", "version 2 to allowed.example", "no such secret"} {
		if !strings.Contains(evs, want) {
			t.Errorf("sandbox events lack %q:\n%s", want, evs)
		}
	}
	// No answer, log or event holds a value.
	logs, err := c.Sandboxes.Logs(ctx, sb.SandboxID, client.LogsQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	// The echo upstream sends the headers it got back, so the commands'
	// output (in the log) shows what the upstream saw: leave those lines
	// out, and look for the value anywhere else.
	strip := func(m string) string {
		for _, v := range []string{value, "sk-rotated-2"} {
			m = strings.ReplaceAll(strings.ReplaceAll(m, "Authorization: Bearer "+v, ""), "X-Key: "+v, "")
		}
		return m
	}
	var kept []string
	for _, e := range logs.LogEntries {
		kept = append(kept, strip(e.Message)+fmt.Sprint(e.Fields))
	}
	for _, l := range logs.Logs {
		kept = append(kept, strip(l.Line))
	}
	lb, _ := json.Marshal(kept)
	list, _ := json.Marshal(mustList(t, c, ctx))
	for what, text := range map[string]string{"events": evs, "sandbox log": string(lb), "daemon log": d.log.String(), "secret list": string(list)} {
		if strings.Contains(text, value) || strings.Contains(text, "sk-rotated-2") {
			i := max(strings.Index(text, value), strings.Index(text, "sk-rotated-2"))
			t.Errorf("the %s holds a secret's value: …%s…", what, text[max(0, i-120):min(len(text), i+40)])
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustList(t *testing.T, c *client.Client, ctx context.Context) []client.Secret {
	t.Helper()
	l, _, err := c.Secrets.List(ctx, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestSecretsBadInput checks the 4xx of malformed secrets and rules, and
// that nothing of them is stored.
func TestSecretsBadInput(t *testing.T) {
	t.Parallel()
	d, _, _ := networkDaemon(t)
	c := d.client()
	ctx := ctxT(t, 2*time.Minute)
	for _, body := range []string{
		`{"name": "a{b", "value": "v"}`,
		`{"name": "a}b", "value": "v"}`,
		`{"name": "a\u0001b", "value": "v"}`,
		`{"name": "", "value": "v"}`,
		`{"name": "ok"}`,
		`{"name": "ok", "value": "` + strings.Repeat("x", 1<<20) + `"}`,
		`{"name": "ok", "value": "v", "allowedHosts": ["*"]}`,
	} {
		code, msg := d.postAPI(ctx, "/secrets", body)
		if code != 400 && code != 413 {
			t.Errorf("POST /secrets %.60s: %d %s, want 400", body, code, msg)
		}
		if strings.Contains(msg, "xxxxxxxx") {
			t.Errorf("the error quotes the value: %.100s", msg)
		}
	}
	if l := mustList(t, c, ctx); len(l) != 0 {
		t.Fatalf("bad creates stored %v", l)
	}
	for _, rules := range []string{
		`{"api.example.com": [{"transform": {"headers": {"Bad Header": "v"}}}]}`,
		`{"api.example.com": [{"transform": {"headers": {"X-A": "v\r\nX-B: w"}}}]}`,
		`{"*": [{"transform": {"headers": {"X-A": "v"}}}]}`,
	} {
		code, msg := d.postAPI(ctx, "/sandboxes", `{"templateID": "bb", "network": {"allowOut": ["198.51.100.10"], "rules": `+rules+`}}`)
		if code != 400 {
			t.Errorf("create with rules %s: %d %s, want 400", rules, code, msg)
		}
	}
	if l, _, err := c.Sandboxes.List(ctx, client.ListOptions{}); err != nil || len(l) != 0 {
		t.Fatalf("bad creates left sandboxes: %v %v", l, err)
	}
}

// e2bSecretsScript drives secrets and network rules with the e2b SDK, one
// step per run.
const e2bSecretsScript = `
import { Sandbox, Secret } from 'e2b'
const [step, id] = process.argv.slice(1)
if (step === 'create') {
  const info = await Secret.create('sdk-token', 'sdk-value-9f2d', { metadata: { owner: 'test' } })
  const sbx = await Sandbox.create('bb', { timeoutMs: 300_000, envs: { TOKEN: Secret.fill('sdk-token') },
    network: { allowOut: ['allowed.example'], denyOut: ['0.0.0.0/0'],
      rules: { 'allowed.example': [{ transform: { headers: { 'X-Api-Key': Secret.fill('sdk-token') } } }] } } })
  console.log(JSON.stringify({ id: sbx.sandboxId, version: info.version, info: JSON.stringify(info) }))
} else if (step === 'update') {
  await Secret.update('sdk-token', 'sdk-value-rotated')
  const listed = []
  const pages = Secret.list()
  while (pages.hasNext) listed.push(...(await pages.nextItems()))
  const got = await Secret.getInfo('sdk-token')
  console.log(JSON.stringify({ version: got.version, names: listed.map(s => s.name), metadata: got.metadata, info: JSON.stringify(got) + JSON.stringify(listed) }))
} else {
  const destroyed = await Secret.destroy('sdk-token')
  const exists = await Secret.exists('sdk-token')
  console.log(JSON.stringify({ destroyed, exists }))
}
`

// TestEgressSecretsE2BSDK drives a secret and network.rules through the
// real e2b SDK: the upstream sees each version's value, the sandbox and
// every answer only the placeholder, and a destroyed secret resolves no
// more.
func TestEgressSecretsE2BSDK(t *testing.T) {
	t.Parallel()
	node := requireNode(t)
	dir, err := filepath.Abs("e2b")
	if err != nil {
		t.Fatal(err)
	}
	checkSDK(t, dir)
	d, runDir, _ := busyboxEgressDaemon(t)
	ctx := ctxT(t, 4*time.Minute)
	sdk := func(args ...string) map[string]any {
		t.Helper()
		cmd := exec.CommandContext(ctx, node, append([]string{"--input-type=module", "-e", e2bSecretsScript}, args...)...)
		cmd.Dir = dir
		url := "http://" + d.addr
		cmd.Env = append(withoutE2BEnv(os.Environ()), "E2B_API_URL="+url, "E2B_SANDBOX_URL="+url, "E2B_API_KEY="+d.key, "E2B_DOMAIN=localhost")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("node %v: %v\n%s", args, err, out)
		}
		if strings.Contains(string(out), "sdk-value") {
			t.Fatalf("node %v saw a value: %s", args, out)
		}
		var res map[string]any
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
			t.Fatalf("node %v printed %q", args, out)
		}
		return res
	}
	got := sdk("create")
	id, _ := got["id"].(string)
	if fmt.Sprint(got["version"]) != "1" {
		t.Fatalf("create: %v", got)
	}
	// (busybox has no bash for the SDK's commands: warren's client runs
	// them.) The sandbox holds the placeholder; its lookup opens the name.
	s := sandboxNet{t, d.client(), ctx, id}
	if env := s.run(`echo "$TOKEN"; nslookup allowed.example >/dev/null`).Stdout; strings.TrimSpace(env) != "${e2b.secrets.sdk-token}" {
		t.Fatalf("the sandbox's TOKEN is %q", env)
	}
	body, err := httpsFromSandbox(t, d, runDir, id, "allowed.example", fakenet.Servers[0])
	if err != nil || !strings.Contains(body, "X-Api-Key: sdk-value-9f2d") {
		t.Fatalf("the upstream did not see the value: %v %q", err, body)
	}
	got = sdk("update")
	if fmt.Sprint(got["version"]) != "2" || fmt.Sprint(got["names"]) != "[sdk-token]" || fmt.Sprint(got["metadata"]) != "map[owner:test]" {
		t.Fatalf("update: %v", got)
	}
	if body, err = httpsFromSandbox(t, d, runDir, id, "allowed.example", fakenet.Servers[0]); err != nil || !strings.Contains(body, "X-Api-Key: sdk-value-rotated") {
		t.Fatalf("after an update the upstream saw: %v %q", err, body)
	}
	// Destroyed: the placeholder no longer resolves.
	if got = sdk("destroy", id); got["destroyed"] != true || got["exists"] != false {
		t.Fatalf("destroy: %v", got)
	}
	if body, err = httpsFromSandbox(t, d, runDir, id, "allowed.example", fakenet.Servers[0]); err != nil || !strings.Contains(body, "403") || strings.Contains(body, "upstream") {
		t.Fatalf("after a destroy: %v %q", err, body)
	}
}

// TestEgressRulesBusybox checks the proxy without the base template: a
// sandbox's plain HTTP passes through it with a rule's header but never
// with a secret; HTTPS from the sandbox's network namespace (a Go client
// that trusts the daemon's CA) gets the rule's header and the secret's
// value; a destination the policy denies stays denied.
func TestEgressRulesBusybox(t *testing.T) {
	t.Parallel()
	d, runDir, _ := busyboxEgressDaemon(t)
	c := d.client()
	ctx := ctxT(t, 3*time.Minute)
	if _, err := c.Secrets.Create(ctx, client.NewSecret{Name: "bb-token", Value: "bb-value-77", AllowedHosts: []string{"allowed.example"}}); err != nil {
		t.Fatal(err)
	}
	rule := client.NetworkRule{Transform: &client.NetworkTransform{Headers: map[string]string{"X-Rule": "r1", "Authorization": "Bearer " + client.Placeholder("bb-token")}}}
	plain := client.NetworkRule{Transform: &client.NetworkTransform{Headers: map[string]string{"X-Rule": "r2"}}}
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Network: &client.Network{AllowOut: []string{"allowed.example", "other.example"}, DenyOut: []string{"0.0.0.0/0"},
		Rules: map[string][]client.NetworkRule{"allowed.example": {rule}, "other.example": {plain}}}})
	if err != nil {
		t.Fatal(err)
	}
	s := sandboxNet{t, c, ctx, sb.SandboxID}
	// Plain HTTP: a rule without secrets applies, one with a secret is
	// refused (and resolving the names opens them for the calls below).
	if res := s.run("timeout 20 wget -q -O - http://other.example/ 2>&1"); !strings.Contains(res.Stdout, "hello from "+fakenet.Servers[2]) {
		t.Fatalf("plain HTTP through the proxy: %d %q", res.ExitCode, res.Stdout)
	}
	if res := s.run("timeout 20 wget -q -O - http://allowed.example/ 2>&1"); res.ExitCode == 0 || strings.Contains(res.Stdout, "hello") {
		t.Fatalf("plain HTTP with a secret: %d %q", res.ExitCode, res.Stdout)
	}
	// HTTPS from the sandbox's namespace, trusting only warren's CA.
	get := func(host, ip string) (string, error) { return httpsFromSandbox(t, d, runDir, sb.SandboxID, host, ip) }
	body, err := get("allowed.example", fakenet.Servers[0])
	if err != nil || !strings.Contains(body, "X-Rule: r1") || !strings.Contains(body, "Authorization: Bearer bb-value-77") || !strings.Contains(body, "over HTTP/2.0") {
		t.Fatalf("HTTPS through the proxy: %v %q", err, body)
	}
	// An upgrade passes: after the 101, bytes go both ways.
	if got, err := upgradeFromSandbox(t, d, runDir, sb.SandboxID); err != nil || got != "ping over the upgrade" {
		t.Fatalf("upgrade through the proxy: %q %v", got, err)
	}
	// A destination the policy denies stays denied through the proxy.
	if body, err := get("denied.example", fakenet.Servers[1]); err == nil {
		t.Fatalf("a denied destination answered through the proxy: %q", body)
	}
	// Rules change live (PUT /sandboxes/ID/network) ...
	changed := client.NetworkRule{Transform: &client.NetworkTransform{Headers: map[string]string{"X-Rule": "r3"}}}
	if err := c.Network.Update(ctx, sb.SandboxID, client.NetworkPolicy{AllowOut: []string{"allowed.example", "other.example"}, DenyOut: []string{"0.0.0.0/0"},
		Rules: map[string][]client.NetworkRule{"allowed.example": {changed}}}); err != nil {
		t.Fatal(err)
	}
	s.run("nslookup allowed.example >/dev/null")
	if body, err := get("allowed.example", fakenet.Servers[0]); err != nil || !strings.Contains(body, "X-Rule: r3") || strings.Contains(body, "bb-value") {
		t.Fatalf("after a rules update: %v %q", err, body)
	}
	// ... and without rules nothing is intercepted: the upstream's own
	// certificate reaches the sandbox, which warren's CA alone does not
	// verify.
	if err := c.Network.Update(ctx, sb.SandboxID, client.NetworkPolicy{AllowOut: []string{"allowed.example"}, DenyOut: []string{"0.0.0.0/0"}}); err != nil {
		t.Fatal(err)
	}
	s.run("nslookup allowed.example >/dev/null")
	if body, err := get("allowed.example", fakenet.Servers[0]); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without rules the proxy still answered: %v %q", err, body)
	}
}

// mustHTTPS starts the fake internet's HTTPS echo servers
// (fakenet.ServeHTTPS) and returns their CA's path.
func mustHTTPS(t *testing.T, in *fakenet.Internet, dir string) string {
	t.Helper()
	caPath, err := in.ServeHTTPS(dir)
	if err != nil {
		t.Fatal(err)
	}
	return caPath
}

// busyboxEgressDaemon is a daemon with the busybox template on a fake
// internet with HTTPS upstreams; it returns the network's run directory.
func busyboxEgressDaemon(t *testing.T) (*daemon, string, *fakenet.Internet) {
	t.Helper()
	dir := t.TempDir()
	in, err := fakenet.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(dir, "run")
	t.Cleanup(func() {
		if err := fakenet.UnmountUnder(runDir); err != nil {
			t.Errorf("unmount the network run dir: %v", err)
		}
		if err := in.Close(); err != nil {
			t.Errorf("remove the fake internet: %v", err)
		}
	})
	caPath := mustHTTPS(t, in, dir)
	d := busyboxDaemon(t, "--network-netns", in.HostNS, "--network-uplink", fakenet.UplinkName, "--network-dns", fakenet.UpstreamDNS,
		"--network-run-dir", runDir, "--network-subnet", "10.88.0.0/24", "--egress-extra-roots", caPath)
	return d, runDir, in
}

// httpsFromSandbox GETs https://host/ at ip from the sandbox's network
// namespace with a client that trusts only the daemon's egress CA (busybox
// has no TLS client that checks certificates).
func httpsFromSandbox(t *testing.T, d *daemon, runDir, id, host, ip string) (string, error) {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(mustRead(t, filepath.Join(d.dataDir, "egress-ca", "ca.pem")))
	var body string
	err := fakenet.InNS(filepath.Join(runDir, "netns", id), func() error {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp4", ip+":443", &tls.Config{RootCAs: roots, ServerName: host})
		if err != nil {
			return err
		}
		defer conn.Close()
		fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
		b, err := io.ReadAll(conn)
		body = string(b)
		return err
	})
	return body, err
}

// upgradeFromSandbox asks allowed.example to switch protocols (its echo
// upgrade) through the proxy and returns what came back of a line sent
// after the 101.
func upgradeFromSandbox(t *testing.T, d *daemon, runDir, id string) (string, error) {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(mustRead(t, filepath.Join(d.dataDir, "egress-ca", "ca.pem")))
	var got string
	err := fakenet.InNS(filepath.Join(runDir, "netns", id), func() error {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp4", fakenet.Servers[0]+":443", &tls.Config{RootCAs: roots, ServerName: "allowed.example"})
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprintf(conn, "GET /upgrade HTTP/1.1\r\nHost: allowed.example\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusSwitchingProtocols {
			return fmt.Errorf("answered %s", resp.Status)
		}
		fmt.Fprintf(conn, "ping over the upgrade\n")
		got, err = br.ReadString('\n')
		got = strings.TrimSpace(got)
		return err
	})
	return got, err
}

// TestEgressSOCKS5 checks network.egressProxy: a sandbox's allowed TCP goes
// through a SOCKS5 server (with RFC 1929 auth) on the fake internet, never
// around it; what the policy denies is not tunnelled either; the password
// is never answered; when the server is gone, egress fails.
func TestEgressSOCKS5(t *testing.T) {
	t.Parallel()
	d, _, in := busyboxEgressDaemon(t)
	c := d.client()
	ctx := ctxT(t, 3*time.Minute)
	socksAddr := fakenet.Servers[2] + ":1080"
	connects := make(chan string, 16)
	var ln net.Listener
	if err := fakenet.InNS(in.UpstreamNS, func() (err error) {
		ln, err = net.Listen("tcp4", socksAddr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go serveSOCKS5(ln, in.UpstreamNS, "agent", "s3cret-pw", connects)

	code, msg := d.postAPI(ctx, "/sandboxes", `{"templateID": "bb", "network": {"allowOut": ["198.51.100.10"], "egressProxy": {"address": "nope"}}}`)
	if code != 400 || !strings.Contains(msg, "host:port") {
		t.Fatalf("an egressProxy address that is not host:port: %d %s", code, msg)
	}
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Network: &client.Network{AllowOut: []string{fakenet.Servers[0]}, DenyOut: []string{"0.0.0.0/0"},
		EgressProxy: &client.EgressProxy{Address: socksAddr, Username: "agent", Password: "s3cret-pw"}}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Network.Policy(ctx, sb.SandboxID)
	if err != nil || p.EgressProxy == nil || p.EgressProxy.Address != socksAddr || p.EgressProxy.Username != "agent" || p.EgressProxy.Password != "" {
		t.Fatalf("GET network: %+v %v", p.EgressProxy, err)
	}
	// The password is sealed at rest: the database (with its WAL) holds
	// the sealed form and never the clear one.
	var db []byte
	for _, f := range []string{"warren.db", "warren.db-wal"} {
		b, _ := os.ReadFile(filepath.Join(d.dataDir, f))
		db = append(db, b...)
	}
	if bytes.Contains(db, []byte("s3cret-pw")) || !bytes.Contains(db, []byte(`"sealedPassword":"v1:`)) {
		t.Fatal("the database holds the SOCKS5 password in clear, or not sealed")
	}
	s := sandboxNet{t, c, ctx, sb.SandboxID}
	echo := fmt.Sprintf("echo tunnelled | timeout 10 nc %s %d", fakenet.Servers[0], fakenet.EchoPort)
	if res := s.run(echo); !strings.Contains(res.Stdout, "hello from "+fakenet.Servers[0]) || !strings.Contains(res.Stdout, "tunnelled") {
		t.Fatalf("TCP through the SOCKS5 server: %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	select {
	case got := <-connects:
		if got != fmt.Sprintf("agent %s:%d", fakenet.Servers[0], fakenet.EchoPort) {
			t.Fatalf("the SOCKS5 server saw %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the connection did not go through the SOCKS5 server")
	}
	// Denied by the policy: reset by the proxy (which accepted the
	// redirected connection) before any tunnel.
	if res := s.run(fmt.Sprintf("echo x | timeout 10 nc %s %d", fakenet.Servers[1], fakenet.EchoPort)); strings.Contains(res.Stdout, "hello") {
		t.Fatalf("a denied destination answered: %q", res.Stdout)
	}
	select {
	case got := <-connects:
		t.Fatalf("a denied destination was tunnelled: %s", got)
	default:
	}
	// The server gone: egress fails closed.
	ln.Close()
	if res := s.run(echo); strings.Contains(res.Stdout, "hello") {
		t.Fatalf("with the SOCKS5 server gone the connection went out: %q", res.Stdout)
	}
}

// serveSOCKS5 is a minimal SOCKS5 server (RFC 1928 CONNECT to an IPv4
// address, RFC 1929 auth) that dials from the namespace at nsPath and
// reports each CONNECT as "user host:port".
func serveSOCKS5(ln net.Listener, nsPath, user, pass string, connects chan<- string) {
	for c, err := ln.Accept(); err == nil; c, err = ln.Accept() {
		go socksSession(c, nsPath, user, pass, connects)
	}
}

// socksSession serves one SOCKS5 client (see serveSOCKS5).
func socksSession(c net.Conn, nsPath, user, pass string, connects chan<- string) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	buf := make([]byte, 512)
	// greeting: VER NMETHODS METHODS; we want 0x02 (user/pass).
	if _, err := io.ReadFull(br, buf[:2]); err != nil || buf[0] != 5 {
		return
	}
	if _, err := io.ReadFull(br, buf[:buf[1]]); err != nil {
		return
	}
	c.Write([]byte{5, 2})
	// RFC 1929: VER ULEN UNAME PLEN PASSWD.
	if _, err := io.ReadFull(br, buf[:2]); err != nil {
		return
	}
	u := make([]byte, buf[1])
	io.ReadFull(br, u)
	io.ReadFull(br, buf[:1])
	pw := make([]byte, buf[0])
	io.ReadFull(br, pw)
	if string(u) != user || string(pw) != pass {
		c.Write([]byte{1, 1})
		return
	}
	c.Write([]byte{1, 0})
	// request: VER CMD RSV ATYP(1) ADDR(4) PORT(2).
	if _, err := io.ReadFull(br, buf[:10]); err != nil || buf[1] != 1 || buf[3] != 1 {
		return
	}
	target := fmt.Sprintf("%d.%d.%d.%d:%d", buf[4], buf[5], buf[6], buf[7], int(buf[8])<<8|int(buf[9]))
	var up net.Conn
	if err := fakenet.InNS(nsPath, func() (err error) {
		up, err = net.DialTimeout("tcp4", target, 5*time.Second)
		return err
	}); err != nil {
		c.Write([]byte{5, 5, 0, 1, 0, 0, 0, 0, 0, 0})
		return
	}
	defer up.Close()
	connects <- string(u) + " " + target
	c.Write([]byte{5, 0, 0, 1, 0, 0, 0, 0, 0, 0})
	_ = c.SetDeadline(time.Time{})
	go func() {
		_, _ = io.Copy(up, br)
		_ = up.(*net.TCPConn).CloseWrite()
	}()
	_, _ = io.Copy(c, up)
}
