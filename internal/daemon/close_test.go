package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/template"
	"github.com/warrenhq/warren/internal/testutil"
)

// A daemon that served sandboxes and is closed leaves no goroutine of its
// own behind: every loop it started (the session's timeouts, pools,
// deleter and archiver, the metrics sampler, the agent links, the log
// writers) is stopped and joined by Close. Sandboxes keep running by
// design; the test removes them and the pool afterwards.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	testutil.RequireRoot(t)
	bin := os.Getenv("WARREN_BIN")
	if bin == "" {
		t.Fatal("WARREN_BIN is not set: run through `make test`, or set it to the directory `make build` writes (bin/)")
	}
	// Goroutines of the test binary itself (and of the runtime) are not
	// the daemon's.
	ignore := goleak.IgnoreCurrent()

	ctx := context.Background()
	cfg := config.Default()
	dataDir, err := os.MkdirTemp("", "warren-daemon-close-")
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = dataDir
	cfg.Listen = "127.0.0.1:0"
	cfg.BuildBase = false
	cfg.AgentBinary = filepath.Join(bin, "warren-agent")
	// Its own cgroup parent: test/e2e's daemons, run beside it, have theirs,
	// and a shared one would be removed by a teardown under another's create.
	cfg.CgroupParent = "warren-test-" + ids.New(8)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	t.Cleanup(func() {
		if err := Teardown(context.Background(), cfg, log); err != nil {
			t.Errorf("teardown: %v", err)
		}
		// A pool mounted twice (a mountinfo read that missed the first
		// mount while other tests changed theirs) needs an unmount each.
		pool := filepath.Join(dataDir, "pool")
		for range 50 {
			if err := unix.Unmount(pool, 0); errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err := os.RemoveAll(dataDir); err != nil {
			t.Errorf("remove the data dir: %v", err)
		}
	})
	d, err := Open(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.EnsureAdminKey(ctx, io.Discard); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Templates.Build(ctx, "bb", template.Source{Busybox: true}, BuildOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(cfg.AdminKeyPath())
	if err != nil {
		t.Fatal(err)
	}

	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	addrc := make(chan string, 1)
	go func() { served <- d.Serve(serveCtx, func(addr string) { addrc <- addr }) }()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-served:
		t.Fatalf("serve: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon did not start serving")
	}

	tr := &http.Transport{}
	c := client.New("http://"+addr, string(trimSpace(key)), client.WithHTTPClient(&http.Client{Transport: tr}))
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Command: "echo hi"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v %v", res, err)
	}
	if _, err := c.Snapshots.Turn(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	kept, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Sandboxes.Delete(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	tr.CloseIdleConnections()

	stop()
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	// A goroutine may take a moment to return after its stop was joined
	// (an http connection's reader, a timer): goleak retries for a while.
	// One goroutine per running native sandbox is meant to stay: it waits
	// for the sandbox's PID 1, this process's child, to reap it whenever
	// it exits (a zombie init reads as stopped).
	reaper := goleak.IgnoreAnyFunction("github.com/warrenhq/warren/internal/runtime/native.(*Runtime).Start.func1")
	if err := goleak.Find(ignore, reaper); err != nil {
		t.Errorf("goroutines left after Close (the sandbox %s still runs, by design):\n%v", kept.SandboxID, err)
	}
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}
