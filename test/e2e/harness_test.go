package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/testutil"
)

// binDir holds the real warren, warren-fleet and warren-agent binaries
// (`make build`); warren executes warren-fleet from beside itself for the
// gateway, node drain and --cluster kubernetes.
func binDir(t *testing.T) string {
	t.Helper()
	d := os.Getenv("WARREN_BIN")
	if d == "" {
		wd, _ := os.Getwd()
		d = filepath.Join(wd, "..", "..", "bin")
	}
	for _, b := range []string{"warren", "warren-fleet", "warren-agent"} {
		if _, err := os.Stat(filepath.Join(d, b)); err != nil {
			t.Fatalf("%s not built in %s: run `make build` (or `make test`, which builds first)", b, d)
		}
	}
	return d
}

// daemon is one `warren serve` process on a throwaway data directory.
type daemon struct {
	t       *testing.T
	bin     string
	dataDir string
	addr    string
	args    []string
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd has exited and been waited for
	started bool          // served once: a restart keeps addr, which clients hold
	log     *testutil.SyncBuffer
	key     string
	// cgroupParent is this daemon's own, for every start on its data
	// directory (recovered sandboxes stay where they are): sharing one,
	// another test's teardown removed it between a daemon making it and
	// making a sandbox's cgroup in it.
	cgroupParent string
}

// freePort returns a loopback address that was free a moment ago. Another
// process may bind it before the caller does: start, the daemon's caller,
// retries on another port then.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Tests call t.Parallel: each daemon has its own data directory (pool, loop
// device, runsc root, sockets), port and, through networkDaemon, its own
// fake host for the network (bridge, nftables table, subnet) and its cgroup
// parent, which its teardown removes. Go
// runs the tests that do not call it first, one at a time, and the parallel
// ones after them: a test that measures, counts host-wide things or loads
// the whole machine stays serial and says why.

// newDaemon prepares a daemon on a fresh data directory; the pool it mounts
// is unmounted when the test ends.
func newDaemon(t *testing.T, extra ...string) *daemon {
	t.Helper()
	testutil.RequireRoot(t)
	dataDir, err := os.MkdirTemp("", "warren-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, bin: binDir(t), dataDir: dataDir, addr: freePort(t), args: extra,
		cgroupParent: "warren-test-" + filepath.Base(dataDir)[len("warren-e2e-"):]}
	t.Cleanup(func() {
		d.stop(syscall.SIGTERM)
		// Sandboxes outlive the daemon by design: stop every one the test
		// left (processes, cgroups) and unmount the pool, so that no loop
		// device stays attached through a sandbox's mount namespace.
		teardown := exec.Command(filepath.Join(d.bin, "warren"), "teardown", "--yes", "--data-dir", dataDir)
		teardown.Env = append(os.Environ(), d.cgroupEnv())
		out, err := teardown.CombinedOutput()
		if err == nil {
			for _, p := range cgroupsNamed(d.cgroupParent, d.cgroupParent+"-gvisor") {
				t.Errorf("teardown of %s left the cgroup parent %s", dataDir, p)
			}
		}
		if err != nil {
			t.Errorf("teardown of %s: %v\n%s", dataDir, err, out)
			pool := filepath.Join(dataDir, "pool")
			for i := 0; i < 50; i++ {
				if err := unix.Unmount(pool, 0); err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		if t.Failed() && d.log != nil {
			t.Logf("daemon log:\n%s", d.log.String())
		}
		os.RemoveAll(dataDir)
	})
	return d
}

// start runs `warren serve` and waits until it answers /health. A daemon
// that exits meanwhile fails the test at once, with its log; one that lost
// its port to another process (freePort's race) is started again, on a new
// port the first time, on the same one after a restart.
func (d *daemon) start() {
	t := d.t
	t.Helper()
	for attempt := 1; ; attempt++ {
		err := d.launch()
		if err == nil {
			break
		}
		if !errors.Is(err, errAddrInUse) || attempt == 5 {
			t.Fatalf("warren serve (attempt %d): %v\n%s", attempt, err, d.log)
		}
		t.Logf("warren serve: %s was taken meanwhile; starting it again", d.addr)
		if d.started {
			time.Sleep(200 * time.Millisecond)
		} else {
			d.addr = freePort(t)
		}
	}
	d.started = true
	b, err := os.ReadFile(filepath.Join(d.dataDir, "admin.key"))
	if err != nil {
		t.Fatalf("admin key: %v\n%s", err, d.log)
	}
	d.key = strings.TrimSpace(string(b))
}

// errAddrInUse: the daemon could not listen on its address, which another
// process holds.
var errAddrInUse = errors.New("its address is in use")

// launch starts one `warren serve` and waits for /health: nil once it
// answers, an error as soon as the process exits (errAddrInUse when it could
// not listen) or after a minute without an answer.
func (d *daemon) launch() error {
	args := append([]string{"serve", "--data-dir", d.dataDir, "--listen", d.addr, "--image-size-gb", "4",
		"--build-base=false", "--cache-dir", cacheDir()}, d.args...)
	d.cmd = exec.Command(filepath.Join(d.bin, "warren"), args...)
	d.cmd.Env = append(os.Environ(), d.cgroupEnv())
	d.log = &testutil.SyncBuffer{}
	d.cmd.Stdout = d.log
	d.cmd.Stderr = d.log
	if err := d.cmd.Start(); err != nil {
		d.cmd = nil
		return err
	}
	exited := make(chan struct{})
	d.exited = exited
	go func(cmd *exec.Cmd) { _ = cmd.Wait(); close(exited) }(d.cmd)
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.After(time.Minute)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if resp, err := hc.Get("http://" + d.addr + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			state := d.cmd.ProcessState
			d.cmd = nil
			if strings.Contains(d.log.String(), "listen on "+d.addr) && strings.Contains(d.log.String(), "address already in use") {
				return fmt.Errorf("%w (%s)", errAddrInUse, state)
			}
			return fmt.Errorf("the daemon exited before it served /health (%s)", state)
		case <-deadline:
			d.stop(syscall.SIGKILL)
			return errors.New("the daemon did not answer /health within a minute")
		case <-tick.C:
		}
	}
}

// cgroupEnv gives `warren serve` and `warren teardown` the daemon's cgroup
// parent. An environment variable, not --cgroup-parent, since TestUpgrade
// runs the previous release on the same arguments, and a release without
// the flag would refuse it; that release's daemon uses the default parent
// (the one daemon of the suite that does).
func (d *daemon) cgroupEnv() string { return "WARREN_CGROUP_PARENT=" + d.cgroupParent }

// cgroupsNamed lists the cgroup directories, in any hierarchy, whose name
// is one of names.
func cgroupsNamed(names ...string) []string {
	var found []string
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, de fs.DirEntry, err error) error {
		if err != nil || !de.IsDir() {
			return nil
		}
		if slices.Contains(names, de.Name()) {
			found = append(found, p)
			return filepath.SkipDir
		}
		return nil
	})
	return found
}

// stop ends the daemon with sig and waits for it.
func (d *daemon) stop(sig syscall.Signal) {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	_ = d.cmd.Process.Signal(sig)
	select {
	case <-d.exited:
	case <-time.After(15 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	d.cmd = nil
}

func (d *daemon) client() *client.Client { return client.New("http://"+d.addr, d.key) }

// postAPI posts a raw JSON body to the daemon's API with its admin key and
// returns the status and body: for what the client would refuse to send or
// hide (E2B's own fields, a wrong request).
func (d *daemon) postAPI(ctx context.Context, path, body string) (int, string) {
	d.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+d.addr+path, strings.NewReader(body))
	req.Header.Set("X-API-Key", d.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// cli runs the warren CLI against the daemon and returns stdout, stderr and
// the exit code.
func (d *daemon) cli(stdin string, args ...string) (string, string, int) {
	d.t.Helper()
	cmd := exec.Command(filepath.Join(d.bin, "warren"), args...)
	cmd.Env = append(os.Environ(), "WARREN_URL=http://"+d.addr, "WARREN_API_KEY="+d.key, "WARREN_DATA_DIR="+d.dataDir)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		d.t.Fatalf("run warren %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// mustCLI runs the CLI and fails the test on a non-zero exit.
func (d *daemon) mustCLI(args ...string) string {
	d.t.Helper()
	out, errOut, code := d.cli("", args...)
	if code != 0 {
		d.t.Fatalf("warren %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

func cacheDir() string {
	if v := os.Getenv("WARREN_CACHE_DIR"); v != "" {
		return v
	}
	return "/var/cache/warren"
}

// leftovers lists what on the host still names the sandbox id: mounts,
// cgroups, volumes, sockets.
func leftovers(t *testing.T, dataDir, id string) []string {
	t.Helper()
	var found []string
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), id) {
			found = append(found, "mount: "+sc.Text())
		}
	}
	f.Close()
	roots := []string{"/sys/fs/cgroup"}
	for _, root := range roots {
		filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if de.IsDir() && de.Name() == id {
				found = append(found, "cgroup: "+p)
				return filepath.SkipDir
			}
			return nil
		})
	}
	for _, dir := range []string{"run", "logs", "sandbox-logs", "procs", "runtime/native", "pool/volumes/sandboxes", "volumes/sandboxes"} {
		entries, _ := os.ReadDir(filepath.Join(dataDir, dir))
		for _, e := range entries {
			if strings.Contains(e.Name(), id) {
				found = append(found, "file: "+filepath.Join(dataDir, dir, e.Name()))
			}
		}
	}
	return found
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// busyboxDaemon starts a daemon (with args) that has a busybox template
// named bb.
func busyboxDaemon(t *testing.T, args ...string) *daemon {
	t.Helper()
	d := newDaemon(t, args...)
	d.start()
	build := []string{"template", "build", "bb", "--busybox", "--data-dir", d.dataDir}
	if i := slices.Index(args, "--storage"); i >= 0 && i+1 < len(args) {
		build = append(build, args[i:i+2]...) // the template is built in the daemon's storage
	}
	d.mustCLI(build...)
	return d
}

// busyboxSandbox starts a daemon, builds the busybox template `bb` and
// creates one sandbox from it; the context ends after d.
func busyboxSandbox(t *testing.T, d time.Duration) (*daemon, context.Context, string) {
	t.Helper()
	dm := busyboxDaemon(t)
	ctx := ctxT(t, d)
	sb, err := dm.client().Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	return dm, ctx, sb.SandboxID
}

// waitFor polls ok every 100 ms until it holds, failing the test after
// limit (a generous bound: timings never gate a test).
func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", limit, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestHarnessStart checks the harness itself: a daemon that exits at start
// is reported at once, not after the wait for /health, and a daemon whose
// port another process took is started again on another one.
func TestHarnessStart(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, "--no-such-flag")
	begin := time.Now()
	err := d.launch()
	if err == nil || errors.Is(err, errAddrInUse) {
		t.Fatalf("launch with a bad flag: %v, want an exit", err)
	}
	if took := time.Since(begin); took > 10*time.Second {
		t.Errorf("a daemon that exits at start was seen after %s", took)
	}

	d = newDaemon(t)
	l, err := net.Listen("tcp", d.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := d.addr
	d.start()
	if d.addr == taken {
		t.Fatalf("the daemon serves on %s, which the test holds", taken)
	}
	if _, err := d.client().Meta.Health(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
}
