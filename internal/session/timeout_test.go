package session

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

// A server that requires a run timeout refuses 0 (never) wherever a caller
// can give one — create, a pooled create, fork, /timeout — with a message
// naming the flag, leaves nothing behind, and still takes any other timeout.
func TestRequireTimeoutRefusesNever(t *testing.T) {
	ctx := context.Background()
	m, _, _ := newManager(t, 10)
	never, short := time.Duration(0), 30*time.Second
	refused := func(what string, err error) {
		t.Helper()
		if !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "--allow-no-timeout") {
			t.Fatalf("%s with timeout 0: want ErrInvalid naming --allow-no-timeout, got %v", what, err)
		}
	}

	// Allowed by default (the zero Config), as E2B allows it.
	if err := m.CheckTimeout(never); err != nil {
		t.Fatalf("timeout 0 refused by default: %v", err)
	}
	m.cfg.RequireTimeout = true
	if err := m.CheckTimeout(-time.Second); !errdefs.IsInvalid(err) {
		t.Fatalf("negative timeout: %v", err)
	}

	_, err := m.Create(ctx, CreateRequest{Team: "a", Timeout: &never})
	refused("create", err)
	if recs, _ := m.List(ctx, "a", store.SandboxFilter{}); len(recs) != 0 {
		t.Fatalf("a refused create left records: %+v", recs)
	}
	sb, err := m.Create(ctx, CreateRequest{Team: "a", Timeout: &short})
	if err != nil || sb.EndAt.IsZero() {
		t.Fatalf("create with a timeout: %v, endAt %v", err, sb.EndAt)
	}
	if def, err := m.Create(ctx, CreateRequest{Team: "a"}); err != nil || def.EndAt.IsZero() {
		t.Fatalf("create with the default timeout: %v, endAt %v", err, def.EndAt)
	}

	refused("/timeout", m.SetTimeout(ctx, "a", sb.ID, never))
	if cur, _ := m.Get(ctx, "a", sb.ID); !cur.EndAt.Equal(sb.EndAt) {
		t.Fatalf("a refused /timeout changed the end from %v to %v", sb.EndAt, cur.EndAt)
	}
	if err := m.SetTimeout(ctx, "a", sb.ID, time.Hour); err != nil {
		t.Fatal(err)
	}

	_, _, err = m.Fork(ctx, "a", sb.ID, ForkRequest{Timeout: &never})
	refused("fork", err)
	if snaps, _ := m.ListSnapshots(ctx, "a", store.SnapshotFilter{}); len(snaps) != 0 {
		t.Fatalf("a refused fork left its implicit snapshot: %+v", snaps)
	}
	if _, forks, err := m.Fork(ctx, "a", sb.ID, ForkRequest{Timeout: &short}); err != nil || forks[0].Err != nil {
		t.Fatalf("fork with a timeout: %v %+v", err, forks)
	}

	// A create that would claim a pooled sandbox is refused before the
	// claim: the pool keeps it.
	m.pools = newPools([]PoolConfig{{Template: "base", Min: 1}})
	p := m.pools["base"]
	m.fillPool(ctx, p)
	_, err = m.Create(ctx, CreateRequest{Team: "a", Template: "base", Timeout: &never})
	refused("pooled create", err)
	if len(p.ready) != 1 || p.hits != 0 {
		t.Fatalf("a refused create took from the pool: ready %d, hits %d", len(p.ready), p.hits)
	}
	if _, err := m.Create(ctx, CreateRequest{Team: "a", Template: "base", Timeout: &short}); err != nil || p.hits != 1 {
		t.Fatalf("pooled create with a timeout: %v, hits %d", err, p.hits)
	}
}

// A runtime call that hangs in one sandbox holds back nothing else: the
// other sandboxes' run timeouts still fire on time, the stuck sandbox is
// skipped (not acted on twice), and a failed or unfinished action counts
// nothing.
func TestStuckSandboxStallsNoTimeout(t *testing.T) {
	ctx := context.Background()
	m, h, st := newManager(t, 10)
	m.cfg.TimeoutTick = 20 * time.Millisecond
	var mu sync.Mutex
	var fired []string
	m.cfg.OnTimeout = func(timeout, action string) {
		mu.Lock()
		fired = append(fired, timeout+"/"+action)
		mu.Unlock()
	}
	short := 50 * time.Millisecond
	stuck, err := m.Create(ctx, CreateRequest{Team: "a", Timeout: &short})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	h.mu.Lock()
	h.hangDestroy = map[string]chan struct{}{stuck.ID: release}
	h.mu.Unlock()
	m.Start(ctx)
	defer m.Close()
	defer close(release)
	// The stuck sandbox's kill is under way (and hangs) before the other's
	// timeout is due.
	waitFor(t, "the stuck sandbox's kill to begin", func() bool {
		rec, err := st.GetSandbox(ctx, stuck.ID)
		return err == nil && rec.State == StateDestroyed
	})
	later, err := m.Create(ctx, CreateRequest{Team: "a", Timeout: &short})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the other sandbox's run timeout", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(fired) > 0
	})
	h.mu.Lock()
	gone := !h.alive[later.ID]
	h.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if !gone || len(fired) != 1 || fired[0] != "run/kill" {
		t.Fatalf("OnTimeout heard %v, want one run/kill (the stuck kill has not finished)", fired)
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A timeout whose action fails counts nothing: the metrics count what was
// done, not what was tried.
func TestFailedTimeoutActionCountsNothing(t *testing.T) {
	ctx := context.Background()
	m, h, _ := newManager(t, 10)
	now := time.Now()
	m.cfg.Now = func() time.Time { return now }
	m.cfg.IdleTimeout, m.cfg.IdleAction = time.Minute, IdleKill
	var fired []string
	m.cfg.OnTimeout = func(timeout, action string) { fired = append(fired, timeout+"/"+action) }
	short := 10 * time.Second
	if _, err := m.Create(ctx, CreateRequest{Team: "a", Timeout: &short}); err != nil {
		t.Fatal(err)
	}
	h.destroyErr = errors.New("runsc delete: timed out")
	now = now.Add(time.Minute)
	m.expire(ctx)
	m.actions.Wait()
	if _, err := m.Create(ctx, CreateRequest{Team: "a"}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute)
	m.idle(ctx)
	m.actions.Wait()
	if len(h.destroyed) != 2 {
		t.Fatalf("destroys tried: %v, want the timed-out and the idle sandbox", h.destroyed)
	}
	if len(fired) != 0 {
		t.Fatalf("OnTimeout heard %v of actions that failed", fired)
	}
}

// Close joins everything Start started, even when it comes at once: no
// loop may outlive the store it writes to.
func TestCloseJoinsBackground(t *testing.T) {
	m, _, _ := newManager(t, 10)
	ignore := goleak.IgnoreCurrent() // the store's own
	m.Start(context.Background())
	m.Close()
	if err := goleak.Find(ignore); err != nil {
		t.Fatalf("goroutines left after Close:\n%v", err)
	}
}

// A connect's timeout never cuts a running sandbox short: the end becomes
// the later of the one it has and now + the timeout; never (0) stays never.
func TestExtendTimeoutNeverShortens(t *testing.T) {
	ctx := context.Background()
	m, _, _ := newManager(t, 10)
	now := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	m.cfg.Now = func() time.Time { return now }
	hour := time.Hour
	sb, err := m.Create(ctx, CreateRequest{Team: "a", Timeout: &hour})
	if err != nil {
		t.Fatal(err)
	}
	end := func() time.Time {
		t.Helper()
		rec, err := m.Get(ctx, "a", sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		return rec.EndAt
	}
	for _, step := range []struct {
		d    time.Duration
		want time.Time
	}{
		{time.Minute, now.Add(time.Hour)},          // shorter: kept
		{2 * time.Hour, now.Add(2 * time.Hour)},    // longer: moved
		{90 * time.Minute, now.Add(2 * time.Hour)}, // shorter again: kept
		{0, time.Time{}},                           // never: the latest end
		{time.Minute, time.Time{}},                 // and it stays never
	} {
		if err := m.ExtendTimeout(ctx, "a", sb.ID, step.d); err != nil {
			t.Fatalf("extend by %s: %v", step.d, err)
		}
		if got := end(); !got.Equal(step.want) {
			t.Fatalf("after extending by %s: end %v, want %v", step.d, got, step.want)
		}
	}
	if err := m.ExtendTimeout(ctx, "b", sb.ID, time.Hour); !errdefs.IsNotFound(err) {
		t.Fatalf("another team's sandbox: %v", err)
	}
	if err := m.ExtendTimeout(ctx, "a", sb.ID, -time.Second); !errdefs.IsInvalid(err) {
		t.Fatalf("negative timeout: %v", err)
	}
}
