package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// createWithKey posts a create of the busybox template with an
// Idempotency-Key and returns the status, the Idempotent-Replayed header
// and the body.
func createWithKey(ctx context.Context, d *daemon, key, marker string) (int, string, string, error) {
	body := `{"templateID":"bb","metadata":{"marker":"` + marker + `"}}`
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+d.addr+"/v2/sandboxes", strings.NewReader(body))
	req.Header.Set("X-API-Key", d.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), string(b), nil
}

// liveWithMarker counts the running sandboxes whose metadata holds marker.
func liveWithMarker(ctx context.Context, t *testing.T, d *daemon, marker string) []string {
	t.Helper()
	list, _, err := d.client().Sandboxes.List(ctx, client.ListOptions{Metadata: map[string]string{"marker": marker}, States: []string{"running"}})
	if err != nil {
		t.Fatal(err)
	}
	var idsOf []string
	for _, sb := range list {
		idsOf = append(idsOf, sb.SandboxID)
	}
	return idsOf
}

// TestIdempotentCreate: creates with one Idempotency-Key make one sandbox —
// sent again, sent eight at once, and retried after the daemon was killed
// in the middle of the first — and a bad key is refused.
func TestIdempotentCreate(t *testing.T) {
	d := busyboxDaemon(t)
	ctx := ctxT(t, 3*time.Minute)
	c := d.client()

	first, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", IdempotencyKey: "turn-1"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", IdempotencyKey: "turn-1", Metadata: map[string]string{"ignored": "yes"}})
	if err != nil {
		t.Fatal(err)
	}
	if again.SandboxID != first.SandboxID || again.EnvdAccessToken != first.EnvdAccessToken {
		t.Errorf("retry made %s, want the first create's %s with the same token", again.SandboxID, first.SandboxID)
	}
	other, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", IdempotencyKey: "turn-2"})
	if err != nil {
		t.Fatal(err)
	}
	if other.SandboxID == first.SandboxID {
		t.Error("another key answered with the first key's sandbox")
	}
	status, replayed, body, err := createWithKey(ctx, d, "turn-1", "x")
	if err != nil || status != http.StatusCreated || replayed != "true" || !strings.Contains(body, first.SandboxID) {
		t.Errorf("raw retry: %d replayed=%q %s %v; want 201, Idempotent-Replayed: true and %s", status, replayed, body, err, first.SandboxID)
	}
	if status, _, body, _ := createWithKey(ctx, d, strings.Repeat("k", 256), "x"); status != http.StatusBadRequest || !strings.Contains(body, "idempotency key") {
		t.Errorf("a 256-character key: %d %s, want 400 naming the key", status, body)
	}

	// Eight at once: one sandbox, every answer naming it.
	var wg sync.WaitGroup
	got := make([]string, 8)
	for i := range got {
		wg.Go(func() {
			status, _, body, err := createWithKey(ctx, d, "burst", "burst")
			if err != nil || status != http.StatusCreated {
				t.Errorf("concurrent create %d: %d %s %v", i, status, body, err)
				return
			}
			got[i] = body
		})
	}
	wg.Wait()
	live := liveWithMarker(ctx, t, d, "burst")
	if len(live) != 1 {
		t.Fatalf("eight concurrent creates with one key made %d sandboxes: %v", len(live), live)
	}
	for i, body := range got {
		if body != "" && !strings.Contains(body, live[0]) {
			t.Errorf("concurrent create %d answered %s, not the one sandbox %s", i, body, live[0])
		}
	}

	// The daemon killed while the first attempt runs: the retry, after a
	// restart, leaves one running sandbox for the key, whichever way the
	// first attempt ended.
	for _, delay := range []time.Duration{0, 30 * time.Millisecond, 120 * time.Millisecond} {
		marker := "killed" + delay.String()
		key := "kill-" + delay.String()
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _, _, _ = createWithKey(ctx, d, key, marker)
		}()
		time.Sleep(delay)
		d.stop(syscall.SIGKILL)
		<-done
		d.start()
		status, _, body, err := createWithKey(ctx, d, key, marker)
		if err != nil || status != http.StatusCreated {
			t.Fatalf("retry after kill -9 (%s in): %d %s %v", delay, status, body, err)
		}
		if live := liveWithMarker(ctx, t, d, marker); len(live) != 1 || !strings.Contains(body, live[0]) {
			t.Errorf("kill -9 %s into a create, then its retry: running sandboxes %v, answer %s; want exactly the one answered", delay, live, body)
		}
	}
}
