package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"
)

// mcpSDKVersion is the @modelcontextprotocol/sdk npm package the MCP
// conformance test pins (test/e2e/mcp).
const mcpSDKVersion = "1.32.2"

// TestMCPNode runs warren's MCP conformance test: node's test runner drives
// the official npm MCP client (test/e2e/mcp/*.test.mjs) against `warren mcp`
// over stdio and the daemon's /mcp over Streamable HTTP, as an MCP host
// other than our own Go client would.
func TestMCPNode(t *testing.T) {
	t.Parallel()
	node := requireNode(t)
	dir, err := filepath.Abs("mcp")
	if err != nil {
		t.Fatal(err)
	}
	checkNPMPackage(t, dir, "@modelcontextprotocol/sdk", mcpSDKVersion)
	files, err := filepath.Glob(filepath.Join(dir, "*.test.mjs"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no *.test.mjs in %s (%v)", dir, err)
	}
	sort.Strings(files)
	args := []string{"--test", "--test-reporter=spec", "--test-timeout=240000"}
	for _, f := range files {
		args = append(args, filepath.Base(f))
	}

	d := busyboxDaemon(t)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"WARREN_URL=http://"+d.addr,
		"WARREN_API_KEY="+d.key,
		"WARREN_BIN="+d.bin,
		"WARREN_TEMPLATE=bb",
		"NO_COLOR=1",
	)
	// node runs each file in a child process, which spawns `warren mcp`: a
	// timeout ends the whole group.
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
		t.Fatalf("the MCP conformance test did not finish in time: %v", ctx.Err())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("the MCP conformance test failed (exit %d): the failing tests are listed above", ee.ExitCode())
	}
	if err != nil {
		t.Fatalf("run node: %v", err)
	}
}

// checkNPMPackage fails the test unless `npm ci` in dir installed the
// pinned version of the package.
func checkNPMPackage(t *testing.T, dir, name, version string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", filepath.FromSlash(name), "package.json"))
	if err != nil {
		t.Fatalf("%s is not installed: run `npm ci` in %s (make test does): %v", name, dir, err)
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		t.Fatalf("%s package.json: %v", name, err)
	}
	if pkg.Version != version {
		t.Fatalf("installed %s is %s, want %s: run `npm ci` in %s", name, pkg.Version, version, dir)
	}
}
