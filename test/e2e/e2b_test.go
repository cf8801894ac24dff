package e2e

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/testutil"
)

// e2bSDKVersion is the e2b npm package the suite pins (test/e2e/e2b).
const e2bSDKVersion = "2.51.0"

// TestE2BSDK runs warren's E2B compatibility suite: node's test runner drives
// the unmodified e2b npm package (test/e2e/e2b/*.test.mjs) against a real
// daemon with the base template, as a user of E2B would point it at warren.
func TestE2BSDK(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the base template by debootstrap (minutes): not in -short mode")
	}
	requireNode(t) // before minutes of building
	// The TLS listener with warren's own CA: ports.test.mjs opens
	// https://<port>-<id>.localhost:<tls port> with node trusting the CA
	// that `warren ca` prints. Volumes get a small default cap, so that
	// volumes.test.mjs can fill one.
	tlsAddr := freePort(t)
	d := newDaemon(t, "--tls-listen", tlsAddr, "--tls-ca", "auto", "--volume-size-mb", "64")
	d.start()
	caFile := filepath.Join(t.TempDir(), "warren-ca.pem")
	if err := os.WriteFile(caFile, []byte(d.mustCLI("ca")), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	d.mustCLI("template", "build", "base", "--debootstrap", "bookworm", "--data-dir", d.dataDir)
	t.Logf("base template built in %s", time.Since(start).Round(time.Millisecond))
	_, tlsPort, _ := strings.Cut(tlsAddr, ":")
	runE2BSuite(t, "http://"+d.addr, d.key, []string{"NODE_EXTRA_CA_CERTS=" + caFile, "WARREN_TLS_PORT=" + tlsPort})
}

// runE2BSuite runs the E2B compatibility suite (test/e2e/e2b/*.test.mjs)
// with node against the warren API at url (a daemon or a fleet's gateway),
// as a user of E2B would point the SDK at it, and fails the test when any
// of it fails. env is added to node's environment; the files named in
// except (without .test.mjs) are left out.
func runE2BSuite(t *testing.T, url, key string, env []string, except ...string) {
	t.Helper()
	node := requireNode(t)
	dir, err := filepath.Abs("e2b")
	if err != nil {
		t.Fatal(err)
	}
	checkSDK(t, dir)
	files, err := filepath.Glob(filepath.Join(dir, "*.test.mjs"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no *.test.mjs in %s (%v)", dir, err)
	}
	files = onlyE2BFiles(t, files, os.Getenv("WARREN_E2B_TESTS"))
	files = slices.DeleteFunc(files, func(f string) bool {
		return slices.Contains(except, strings.TrimSuffix(filepath.Base(f), ".test.mjs"))
	})
	sort.Strings(files)
	args := []string{"--test", "--test-concurrency=2", "--test-reporter=spec", "--test-timeout=240000"}
	for _, f := range files {
		args = append(args, filepath.Base(f))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	cmd.Env = append(withoutE2BEnv(os.Environ()),
		"E2B_API_URL="+url,
		"E2B_SANDBOX_URL="+url,
		"E2B_VOLUME_API_URL="+url,
		"E2B_API_KEY="+key,
		"E2B_DOMAIN="+config.Default().Domain,
		"NO_COLOR=1",
	)
	cmd.Env = append(cmd.Env, env...)
	// node runs each file in a child process: a timeout ends the whole group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			t.Log(sc.Text())
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	start := time.Now()
	err = cmd.Run()
	pw.Close()
	<-logged
	t.Logf("node --test finished in %s", time.Since(start).Round(time.Millisecond))
	if ctx.Err() != nil {
		t.Fatalf("the E2B SDK suite did not finish in time: %v", ctx.Err())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("the E2B SDK suite failed (exit %d): the failing tests are listed above", ee.ExitCode())
	}
	if err != nil {
		t.Fatalf("run node: %v", err)
	}
}

// onlyE2BFiles keeps the suite's files that only names, comma-separated
// ("list,errors" keeps list.test.mjs and errors.test.mjs; "" keeps all): to
// run a part of the suite while working on it. A name with no file fails
// the test rather than running nothing.
func onlyE2BFiles(t *testing.T, files []string, only string) []string {
	t.Helper()
	if only == "" {
		return files
	}
	var out []string
	for _, name := range strings.Split(only, ",") {
		f := filepath.Join(filepath.Dir(files[0]), strings.TrimSpace(name)+".test.mjs")
		if !slices.Contains(files, f) {
			t.Fatalf("WARREN_E2B_TESTS names %q, but there is no %s", name, f)
		}
		out = append(out, f)
	}
	return out
}

// checkNode fails the test when node is older than the SDK supports
// (>=20.18.1 <21 || >=22).
// requireNode returns the node binary the node suites run, of a version the
// e2b SDK supports. `make test` does not install node (Debian's is too old),
// so its absence is a failure that says how to get it.
func requireNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testutil.Missing(t, "node is not installed: the node suites (the E2B SDK, the MCP conformance test) need node >= 20.18.1 (<21) or >= 22 and npm; install them (e.g. from nodejs.org or NodeSource), then `make test` installs the SDKs")
	}
	out, err := exec.Command(node, "-p", "process.versions.node").Output()
	if err != nil {
		t.Fatalf("node -p process.versions.node: %v", err)
	}
	v := strings.TrimSpace(string(out))
	var n [3]int
	for i, p := range strings.SplitN(v, ".", 3) {
		n[i], _ = strconv.Atoi(p)
	}
	ok := n[0] >= 22 || (n[0] == 20 && (n[1] > 18 || (n[1] == 18 && n[2] >= 1)))
	if !ok {
		t.Fatalf("node %s is too old for the e2b SDK: it needs >= 20.18.1 (<21) or >= 22", v)
	}
	return node
}

// checkSDK fails the test unless `npm ci` installed the pinned SDK.
func checkSDK(t *testing.T, dir string) {
	t.Helper()
	checkNPMPackage(t, dir, "e2b", e2bSDKVersion)
}

// withoutE2BEnv drops E2B_* variables of the caller (E2B_DEBUG would make the
// SDK fake sandboxes; a real E2B key must not reach the suite).
func withoutE2BEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "E2B_") {
			out = append(out, kv)
		}
	}
	return out
}
