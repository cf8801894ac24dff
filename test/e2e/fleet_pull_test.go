package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/client"
)

// TestFleetSnapshotPull has node B of a two-node fleet pull snapshots from
// node A itself (POST /snapshots/pull): bad input is refused with a clear
// error and leaves nothing; a turn comes whole, the next as a delta; a pull
// cut mid-stream by a proxy resumes from where it stopped and ends with
// A's files. It measures a ~300 MB pull against the old pipe through a
// third process, so it runs serially.
func TestFleetSnapshotPull(t *testing.T) {
	f, ctx := startKeyedFleet(t)
	a, b := f.nodes[0].d, f.nodes[1].d
	ca, cb := a.client(), b.client()
	sb, err := ca.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	run := func(cmd string) {
		t.Helper()
		res, err := ca.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Command: cmd, User: "root"})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%.60s: %v %+v", cmd, err, res)
		}
	}
	turn := func() string {
		t.Helper()
		res, err := ca.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Cmd: []string{"true"}, Turn: true})
		if err != nil || res.SnapshotID == "" {
			t.Fatalf("turn: %v %+v", err, res)
		}
		return res.SnapshotID
	}
	run(turnCmd(1) + ` && mkdir -p /workspace/big && for i in $(seq 24); do head -c 1048576 /dev/urandom > /workspace/big/f$i; done`)
	t1 := turn()
	run(turnCmd(2) + ` && echo more >> /workspace/log.txt`)
	t2 := turn()
	whole := int64(len(export(t, ca, t1, "")))
	delta := int64(len(export(t, ca, t2, t1)))
	peer := "http://" + a.addr
	pull := func(from, id string) (int, string) {
		t.Helper()
		return b.postAPI(ctx, "/snapshots/pull", fmt.Sprintf(`{"from":%q,"snapshot":%q,"team":"admin"}`, from, id))
	}
	spools := func() []string {
		found, _ := filepath.Glob(filepath.Join(b.dataDir, "pulls", "*.part"))
		return found
	}

	// Bad input: a clear error, and nothing on B.
	wrongKey := f.peer(ctx, "wrong-key", "http://"+startCutProxy(t, a.addr, -1, "wrong-key").addr)
	dead := f.peer(ctx, "dead", "http://127.0.0.1:1")
	for _, c := range []struct {
		what, from, id string
		code           int
		msg            string
	}{
		{"no node's endpoint", "http://127.0.0.1:2", t1, 403, "no WarrenNode's endpoint"},
		{"unreachable peer", dead, t1, 502, "connection refused"},
		{"not a URL", "ftp://" + a.addr, t1, 400, "not a peer's endpoint URL"},
		{"unknown snapshot", peer, "nosuchsnapshot", 404, "nosuchsnapshot"},
		{"the peer refuses the key", wrongKey, t1, 502, "401"},
	} {
		code, body := pull(c.from, c.id)
		if code != c.code || !strings.Contains(body, c.msg) {
			t.Errorf("%s: %d %s, want %d saying %q", c.what, code, body, c.code, c.msg)
		}
	}
	if _, err := cb.Snapshots.Get(ctx, t1); client.StatusCode(err) != 404 {
		t.Errorf("after bad pulls B has %s: %v", t1, err)
	}
	if s := spools(); len(s) != 0 {
		t.Errorf("bad pulls left spools: %v", s)
	}
	assertNoVolumes(t, b, nil)

	// A pull cut after 6 MB: a 502 saying so, the bytes kept, no snapshot.
	cut := f.peer(ctx, "cut", "http://"+startCutProxy(t, a.addr, 6<<20, "").addr)
	if code, body := pull(cut, t1); code != 502 || !strings.Contains(body, "pull again to continue") {
		t.Fatalf("cut pull: %d %s", code, body)
	}
	if s := spools(); len(s) != 1 {
		t.Fatalf("a cut pull's spool: %v", s)
	}
	assertNoVolumes(t, b, nil)
	// The retry continues: the peer sends only what is left.
	count := startCutProxy(t, a.addr, -1, "")
	if code, body := pull(f.peer(ctx, "count1", "http://"+count.addr), t1); code != 201 {
		t.Fatalf("resumed pull: %d %s", code, body)
	}
	if sent := count.sent.Load(); sent >= whole-(4<<20) {
		t.Errorf("the resumed pull moved %d bytes of a %d-byte bundle cut after 6 MiB (resumed at the last whole 1 MiB frame)", sent, whole)
	}
	t.Logf("whole bundle %d bytes; resumed pull moved %d", whole, count.sent.Load())
	if code, _ := pull(peer, t1); code != 200 {
		t.Errorf("pull of a held snapshot: %d, want 200", code)
	}

	// Turn 2 comes as a delta against turn 1, which B now holds.
	count = startCutProxy(t, a.addr, -1, "")
	if code, body := pull(f.peer(ctx, "count2", "http://"+count.addr), t2); code != 201 {
		t.Fatalf("pull turn 2: %d %s", code, body)
	}
	if sent := count.sent.Load(); sent > delta+(1<<20) {
		t.Errorf("pull of turn 2 moved %d bytes; its delta is %d", sent, delta)
	}
	if s := spools(); len(s) != 0 {
		t.Errorf("finished pulls left spools: %v", s)
	}
	assertNoVolumes(t, b, []string{t1, t2})
	for _, id := range []string{t1, t2} {
		assertSameFiles(t, snapshotVolume(a, id), snapshotVolume(b, id))
	}
	measurePull(t, ctx, f)
}

// measurePull times a ~300 MB snapshot moved from node A to node B by a
// pull and by the old pipe (a third process reading A's export into B's
// import, as the gateway did), in CPU-seconds of every process involved.
func measurePull(t *testing.T, ctx context.Context, f *fleetT) {
	a, b := f.nodes[0].d, f.nodes[1].d
	ca := a.client()
	sb, err := ca.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	fill := `mkdir -p /workspace/big && for i in $(seq 300); do head -c 1048576 /dev/urandom > /workspace/big/g$i; done`
	if res, err := ca.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Command: fill, User: "root"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("fill: %v %+v", err, res)
	}
	snap, err := ca.Snapshots.Create(ctx, sb.SandboxID, client.NewSnapshot{})
	if err != nil {
		t.Fatal(err)
	}
	big := snap.SnapshotID
	// The snapshot's volume settles in the pool after the answer.
	waitFor(t, 30*time.Second, "the big snapshot's volume", func() bool {
		_, err := os.Stat(snapshotVolume(a, big))
		return err == nil
	})
	dropPages(t, snapshotVolume(a, big))
	cpu0 := cpuSeconds(t, a) + cpuSeconds(t, b)
	load := loadAvg()
	start := time.Now()
	code, body := b.postAPI(ctx, "/snapshots/pull", fmt.Sprintf(`{"from":"http://%s","snapshot":%q,"team":"admin"}`, a.addr, big))
	took := time.Since(start)
	if code != 201 {
		t.Fatalf("pull of the big turn: %d %s", code, body)
	}
	n := int64(len(export(t, a.client(), big, "")))
	cpu := cpuSeconds(t, a) + cpuSeconds(t, b) - cpu0
	t.Logf("BENCH pull %d bytes in %v = %.0f MB/s, %.2f CPU-s (%.2f CPU-s/GiB), load %s",
		n, took.Round(time.Millisecond), float64(n)/took.Seconds()/1e6, cpu, cpu/(float64(n)/(1<<30)), load)

	// The old way, into a third node-less daemon.
	c := newDaemon(t)
	c.start()
	dropPages(t, snapshotVolume(a, big))
	cpu0 = cpuSeconds(t, a) + cpuSeconds(t, c) + selfCPU()
	load = loadAvg()
	start = time.Now()
	transfer(t, ctx, a.client(), c.client(), big, "")
	took = time.Since(start)
	cpu = cpuSeconds(t, a) + cpuSeconds(t, c) + selfCPU() - cpu0
	t.Logf("BENCH pipe %d bytes in %v = %.0f MB/s, %.2f CPU-s (%.2f CPU-s/GiB), load %s",
		n, took.Round(time.Millisecond), float64(n)/took.Seconds()/1e6, cpu, cpu/(float64(n)/(1<<30)), load)
}

// cpuSeconds is the CPU time of a daemon and its waited-for children (the
// btrfs send and receive processes).
func cpuSeconds(t *testing.T, d *daemon) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	var ticks float64
	for _, i := range []int{11, 12, 13, 14} { // utime, stime, cutime, cstime
		v, _ := strconv.ParseFloat(fields[i], 64)
		ticks += v
	}
	return ticks / 100
}

// selfCPU is this test process's CPU time.
func selfCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// cutProxy forwards TCP connections to a daemon: it closes each after
// limit bytes of answer (limit < 0: never), and rewrites the API key of
// the requests when key is set (a peer that refuses the node's key).
type cutProxy struct {
	addr string
	sent atomic.Int64 // bytes of answers passed on
}

func startCutProxy(t *testing.T, target string, limit int64, key string) *cutProxy {
	t.Helper()
	if key != "" {
		return startKeyProxy(t, target, key)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	p := &cutProxy{addr: l.Addr().String()}
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			go p.serve(in, target, limit)
		}
	}()
	return p
}

func (p *cutProxy) serve(in net.Conn, target string, limit int64) {
	defer in.Close()
	out, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer out.Close()
	go func() { _, _ = io.Copy(out, in) }()
	var r io.Reader = out
	if limit >= 0 {
		r = io.LimitReader(out, limit)
	}
	_, _ = io.Copy(countingWriter{in, &p.sent}, r)
}

// countingWriter counts what passes as it passes (a kept-alive connection
// is not closed when its answer ends).
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// startKeyProxy passes HTTP requests on with a wrong API key.
func startKeyProxy(t *testing.T, target, key string) *cutProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, "http://"+target+r.URL.RequestURI(), r.Body)
		req.Header = r.Header.Clone()
		req.Header.Set("X-API-Key", key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		w.WriteHeader(res.StatusCode)
		_, _ = io.Copy(w, res.Body)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return &cutProxy{addr: l.Addr().String()}
}

// peer registers endpoint as a WarrenNode of the fleet (a pull sends the
// fleet's key only to the fleet's nodes): the test's proxies stand between
// B and A. It returns endpoint.
func (f *fleetT) peer(ctx context.Context, name, endpoint string) string {
	f.t.Helper()
	wn := warrenv1.WarrenNode{ObjectMeta: metav1.ObjectMeta{Name: "proxy-" + name}}
	if err := f.env.Client.Create(ctx, &wn); err != nil {
		f.t.Fatal(err)
	}
	wn.Status.Endpoint = endpoint
	if err := f.env.Client.Status().Update(ctx, &wn); err != nil {
		f.t.Fatal(err)
	}
	return endpoint
}
