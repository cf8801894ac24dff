package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestIdleTimeout: an idle sandbox is paused after --idle-timeout; one whose
// process keeps printing is not; a paused sandbox is killed after
// --paused-retention; each step is in the events with its cause.
func TestIdleTimeout(t *testing.T) {
	d := busyboxDaemon(t, "--idle-timeout", "2s", "--paused-retention", "3s")
	c := d.client()
	ctx := ctxT(t, 2*time.Minute)
	quiet, err := c.CreateSandbox(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	busy, err := c.CreateSandbox(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartProcess(ctx, busy.SandboxID, client.StartProcessRequest{
		ExecRequest: client.ExecRequest{Command: "while :; do echo tick; sleep 0.2; done"},
	}); err != nil {
		t.Fatal(err)
	}
	state := func(id string) string {
		det, err := c.GetSandbox(ctx, id)
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
	evs, _ := c.SandboxEvents(ctx, quiet.SandboxID, 0)
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
	// Both firings are counted in /metrics, by timeout and action.
	prom := httpGet(t, d, "/metrics", d.key, 200)
	for _, want := range []string{
		`warren_timeouts_fired_total{timeout="idle",action="pause"} 1`,
		`warren_timeouts_fired_total{timeout="retention",action="kill"} 1`,
	} {
		if !strings.Contains(prom, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, prom)
		}
	}
	if err := c.DeleteSandbox(ctx, busy.SandboxID); err != nil {
		t.Fatal(err)
	}
}

// TestIdlePortTraffic: bytes moving on a long-lived port connection keep a
// sandbox from going idle — a WebSocket-style upgrade through the HTTP port
// route, and raw TCP through the route `warren port-forward` uses — and
// the same connections kept open but silent do not.
func TestIdlePortTraffic(t *testing.T) {
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
		"port-forward": func(id string) (net.Conn, error) { return c.ConnectPort(ctx, id, 8005) },
	}
	var streams []*stream
	for _, name := range []string{"upgrade", "port-forward"} {
		sb, err := c.CreateSandbox(ctx, client.NewSandbox{TemplateID: "bb"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.WriteFile(ctx, sb.SandboxID, "/up.sh", strings.NewReader(upgradeScript), 0o755, ""); err != nil {
			t.Fatal(err)
		}
		argv := map[string][]string{"upgrade": {"nc", "-ll", "-p", "8003", "-e", "/up.sh"}, "port-forward": {"nc", "-ll", "-p", "8005", "-e", "cat"}}[name]
		if _, err := c.StartProcess(ctx, sb.SandboxID, client.StartProcessRequest{ExecRequest: client.ExecRequest{Cmd: argv}}); err != nil {
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
		det, err := c.GetSandbox(ctx, id)
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
		evs, _ := c.SandboxEvents(ctx, s.id, 0)
		var kinds []string
		for _, e := range evs {
			kinds = append(kinds, e.Kind+"/"+e.Cause)
		}
		if got := strings.Join(kinds, " "); !strings.Contains(got, "idle/timeout paused/timeout") {
			t.Fatalf("%s: events: %s", s.name, got)
		}
	}
}
