package e2e

import (
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
