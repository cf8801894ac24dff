package e2e

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestIdleTimeout: an idle sandbox is paused after --idle-timeout; one whose
// process keeps printing is not; a paused sandbox is killed after
// --paused-retention; each step is in the events with its cause.
func TestIdleTimeout(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t, "--idle-timeout", "2s", "--paused-retention", "3s")
	c := d.client()
	ctx := ctxT(t, 2*time.Minute)
	quiet, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	busy, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Processes.Start(ctx, busy.SandboxID, client.StartProcessRequest{
		ExecRequest: client.ExecRequest{Command: "while :; do echo tick; sleep 0.2; done"},
	}); err != nil {
		t.Fatal(err)
	}
	state := func(id string) string {
		det, err := c.Sandboxes.Get(ctx, id)
		if client.StatusCode(err) == 404 {
			return "gone"
		}
		if err != nil {
			t.Fatal(err)
		}
		return det.State
	}
	deadline := time.Now().Add(15 * time.Second)
	for state(quiet.SandboxID) != "paused" {
		if time.Now().After(deadline) {
			t.Fatalf("the idle sandbox was not paused: %s", state(quiet.SandboxID))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st := state(busy.SandboxID); st != "running" {
		t.Fatalf("a sandbox whose process prints was treated as idle: %s", st)
	}
	evs, _ := c.Sandboxes.Events(ctx, quiet.SandboxID, 0)
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind+"/"+e.Cause)
	}
	if got := strings.Join(kinds, " "); !strings.Contains(got, "idle/timeout paused/timeout") {
		t.Fatalf("events of the idle sandbox: %s", got)
	}
	// Retention: paused for 3 s → killed.
	deadline = time.Now().Add(15 * time.Second)
	for state(quiet.SandboxID) != "gone" {
		if time.Now().After(deadline) {
			t.Fatalf("the paused sandbox outlived its retention: %s", state(quiet.SandboxID))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st := state(busy.SandboxID); st != "running" {
		t.Fatalf("busy sandbox: %s", st)
	}
	// Both firings are counted in /metrics, by timeout and action, once
	// their actions are done: the kill is counted when the sandbox's
	// teardown has finished, a moment after its record reads as gone.
	wants := []string{
		`warren_timeouts_fired_total{action="pause",timeout="idle"} 1`,
		`warren_timeouts_fired_total{action="kill",timeout="retention"} 1`,
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		prom := httpGet(t, d, "/metrics", d.key, 200)
		missing := ""
		for _, want := range wants {
			if !strings.Contains(prom, want) {
				missing = want
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %q:\n%s", missing, prom)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := c.Sandboxes.Delete(ctx, busy.SandboxID); err != nil {
		t.Fatal(err)
	}
}

// TestIdlePortTraffic: bytes moving on a long-lived port connection keep a
// sandbox from going idle — a WebSocket-style upgrade through the HTTP port
// route, and raw TCP through the route `warren port-forward` uses — and
// the same connections kept open but silent do not.
func TestIdlePortTraffic(t *testing.T) {
	// Serial: traffic every 250-500 ms must beat a 2 s idle timeout; on a loaded
	// machine a busy neighbour made a ping take longer than that once.
	d := busyboxDaemon(t, "--idle-timeout", "2s", "--idle-action", "pause")
	c := d.client()
	ctx := ctxT(t, time.Minute)
	type stream struct {
		name, id string
		conn     net.Conn
		r        *bufio.Reader
	}
	open := map[string]func(id string) (net.Conn, error){
		"upgrade": func(id string) (net.Conn, error) {
			conn, err := net.DialTimeout("tcp", d.addr, 5*time.Second)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: 8003-%s.localhost\r\nX-API-Key: %s\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n", id, d.key)
			return conn, nil
		},
		"port-forward": func(id string) (net.Conn, error) { return c.Network.ConnectPort(ctx, id, 8005) },
	}
	var streams []*stream
	for _, name := range []string{"upgrade", "port-forward"} {
		sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Files.Write(ctx, sb.SandboxID, "/up.sh", strings.NewReader(upgradeScript), 0o755, ""); err != nil {
			t.Fatal(err)
		}
		argv := map[string][]string{"upgrade": {"nc", "-ll", "-p", "8003", "-e", "/up.sh"}, "port-forward": {"nc", "-ll", "-p", "8005", "-e", "cat"}}[name]
		if _, err := c.Processes.Start(ctx, sb.SandboxID, client.StartProcessRequest{ExecRequest: client.ExecRequest{Cmd: argv}}); err != nil {
			t.Fatal(err)
		}
		s := &stream{name: name, id: sb.SandboxID}
		// nc starts in the background: dial until it answers.
		waitFor(t, 10*time.Second, name+" server", func() bool {
			conn, err := open[name](s.id)
			if err != nil {
				return false
			}
			r := bufio.NewReader(conn)
			if name == "upgrade" {
				resp, err := http.ReadResponse(r, nil)
				if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
					conn.Close()
					return false
				}
			}
			s.conn, s.r = conn, r
			return true
		})
		t.Cleanup(func() { s.conn.Close() })
		streams = append(streams, s)
	}
	state := func(id string) string {
		det, err := c.Sandboxes.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return det.State
	}

	// A few bytes each way every 500 ms for 5 s, two and a half idle
	// timeouts: both stay running.
	for i := range 10 {
		for _, s := range streams {
			_ = s.conn.SetDeadline(time.Now().Add(10 * time.Second))
			msg := fmt.Sprintf("ping %d\n", i)
			if _, err := io.WriteString(s.conn, msg); err != nil {
				t.Fatalf("%s: write: %v", s.name, err)
			}
			if got, err := s.r.ReadString('\n'); err != nil || got != msg {
				t.Fatalf("%s: echo %q, %v; want %q", s.name, got, err, msg)
			}
		}
		time.Sleep(500 * time.Millisecond)
		for _, s := range streams {
			if st := state(s.id); st != "running" {
				t.Fatalf("%s: a sandbox with traffic on its port went %s after %d pings", s.name, st, i+1)
			}
		}
	}

	// Silent, still open: both are paused by the idle timeout.
	for _, s := range streams {
		waitFor(t, 10*time.Second, s.name+" sandbox paused while its connection is silent", func() bool { return state(s.id) == "paused" })
		evs, _ := c.Sandboxes.Events(ctx, s.id, 0)
		var kinds []string
		for _, e := range evs {
			kinds = append(kinds, e.Kind+"/"+e.Cause)
		}
		if got := strings.Join(kinds, " "); !strings.Contains(got, "idle/timeout paused/timeout") {
			t.Fatalf("%s: events: %s", s.name, got)
		}
	}
}

// TestIdleEnvdStreams: long envd streams keep a sandbox from going idle
// while they carry something — a slow upload through /files, a watch that
// delivers events — and a watch still open on a quiet directory, though
// its keepalives keep coming, does not; after each, the idle action fires.
func TestIdleEnvdStreams(t *testing.T) {
	// Serial: traffic every 250-500 ms must beat a 2 s idle timeout; on a loaded
	// machine a busy neighbour made a ping take longer than that once.
	d := busyboxDaemon(t, "--idle-timeout", "2s", "--idle-action", "pause")
	c := d.client()
	ctx := ctxT(t, time.Minute)
	envd := func(method, path, id, contentType string, body io.Reader) *http.Request {
		req, err := http.NewRequestWithContext(ctx, method, "http://"+d.addr+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("E2b-Sandbox-Id", id)
		req.Header.Set("X-API-Key", d.key)
		req.Header.Set("Content-Type", contentType)
		return req
	}
	state := func(id string) string {
		det, err := c.Sandboxes.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return det.State
	}
	idled := func(what, id string) {
		t.Helper()
		waitFor(t, 10*time.Second, what+" sandbox paused once its stream was quiet", func() bool { return state(id) == "paused" })
		evs, _ := c.Sandboxes.Events(ctx, id, 0)
		var kinds []string
		for _, e := range evs {
			kinds = append(kinds, e.Kind+"/"+e.Cause)
		}
		if got := strings.Join(kinds, " "); !strings.Contains(got, "idle/timeout paused/timeout") {
			t.Fatalf("%s: events: %s", what, got)
		}
	}
	newSandbox := func() string {
		sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
		if err != nil {
			t.Fatal(err)
		}
		return sb.SandboxID
	}
	// Uploads through the SDK's /files route and through warren's own.
	uploads := map[string]func(id string, body io.Reader) error{
		"envd upload": func(id string, body io.Reader) error {
			resp, err := http.DefaultClient.Do(envd("POST", "/files?path=/tmp/slow&username=root", id, "application/octet-stream", body))
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%d %s", resp.StatusCode, b)
			}
			return nil
		},
		"warren upload": func(id string, body io.Reader) error {
			_, err := c.Files.Write(ctx, id, "/tmp/slow", body, 0o644, "")
			return err
		},
	}
	sandboxes := map[string]string{"watched": newSandbox()}
	for what := range uploads {
		sandboxes[what] = newSandbox()
	}
	watched := sandboxes["watched"]

	// A watch on /tmp/w with keepalives every second, half the idle timeout:
	// were they counted, the sandbox would never idle.
	if _, err := c.Files.MakeDir(ctx, watched, "/tmp/w"); err != nil {
		t.Fatal(err)
	}
	msg := []byte(`{"path":"/tmp/w"}`)
	req := envd("POST", "/filesystem.Filesystem/WatchDir", watched, "application/connect+json",
		bytes.NewReader(append([]byte{0, 0, 0, 0, byte(len(msg))}, msg...)))
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set("Keepalive-Ping-Interval", "1")
	req.Header.Set("Authorization", "Basic cm9vdDo=") // root
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("WatchDir: %d %s", resp.StatusCode, b)
	}
	// quietKeepalives counts the keepalives since the last event.
	var events, quietKeepalives atomic.Int32
	started := make(chan struct{})
	go func() {
		for {
			var hdr [5]byte
			if _, err := io.ReadFull(resp.Body, hdr[:]); err != nil {
				return
			}
			b := make([]byte, binary.BigEndian.Uint32(hdr[1:]))
			if _, err := io.ReadFull(resp.Body, b); err != nil || hdr[0]&2 != 0 {
				return // the end of the stream
			}
			var ev map[string]json.RawMessage
			_ = json.Unmarshal(b, &ev)
			switch {
			case ev["start"] != nil:
				close(started)
			case ev["filesystem"] != nil:
				events.Add(1)
				quietKeepalives.Store(0)
			case ev["keepalive"] != nil:
				quietKeepalives.Add(1)
			}
		}
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not start")
	}
	// A writer that prints nothing: only the watch's events tell of it.
	if _, err := c.Processes.Start(ctx, watched, client.StartProcessRequest{
		ExecRequest: client.ExecRequest{Command: "i=0; while [ $i -lt 18 ]; do i=$((i+1)); echo $i > /tmp/w/f; sleep 0.3; done"},
	}); err != nil {
		t.Fatal(err)
	}

	// Meanwhile, 20 KiB uploads in 1 KiB pieces every 250 ms: 5 s, two
	// and a half idle timeouts.
	pipes := map[string]*io.PipeWriter{}
	uploaded := make(chan error, len(uploads))
	for what, upload := range uploads {
		pr, pw := io.Pipe()
		pipes[what] = pw
		go func() {
			err := upload(sandboxes[what], pr)
			pr.CloseWithError(err) // a failed upload fails the writes too
			if err != nil {
				err = fmt.Errorf("%s: %w", what, err)
			}
			uploaded <- err
		}()
	}
	piece := bytes.Repeat([]byte("x"), 1024)
	for i := range 20 {
		for what, pw := range pipes {
			if _, err := pw.Write(piece); err != nil {
				t.Fatalf("%s: piece %d: %v", what, i, err)
			}
		}
		time.Sleep(250 * time.Millisecond)
		for what, id := range sandboxes {
			if st := state(id); st != "running" {
				t.Fatalf("%s sandbox went %s %v into its stream (%d watch events)", what, st, time.Duration(i+1)*250*time.Millisecond, events.Load())
			}
		}
	}
	for _, pw := range pipes {
		pw.Close()
	}
	for range uploads {
		if err := <-uploaded; err != nil {
			t.Fatal(err)
		}
	}
	for what := range uploads {
		if e, err := c.Files.Stat(ctx, sandboxes[what], "/tmp/slow"); err != nil || e.Size != 20<<10 {
			t.Fatalf("%s: file: %+v, %v", what, e, err)
		}
	}
	if events.Load() == 0 {
		t.Fatal("the watch delivered no events")
	}

	// Every stream quiet: the uploads over, the watch open on a directory
	// nobody writes (the writer is done by now) but sending keepalives.
	for what, id := range sandboxes {
		idled(what, id)
	}
	if quietKeepalives.Load() == 0 {
		t.Fatal("the watch sent no keepalives after its last event: the test proves nothing about them")
	}
}
