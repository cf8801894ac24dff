package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/network"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/store"
)

// fakeHost records what the manager asks of the machine. It is a unit-test
// fake for the manager's decisions; the real host is exercised in test/e2e.
type fakeHost struct {
	mu         sync.Mutex
	templates  map[string]bool
	alive      map[string]bool
	destroyed  []string
	failNext   error
	reconcile  map[string]bool
	snaps      map[string]bool
	rolledBack []string
	streams    map[string]string // archive stream path -> parent snapshot
	archived   []string
	restored   []string
	chains     []int                     // streams each restore replayed
	networks   map[string]network.Policy // sandboxes with a network, and their policies
	netFail    error                     // NetworkAvailable's answer
	memory     bool                      // it can save memory (see hibernate_fake_test.go)
	images     map[string]bool           // memory images: snapshot-<id>, hibernate-<id>
	lastSpec   sandbox.Spec              // the last Create's spec
	frozen     map[string]bool           // sandboxes whose processes are frozen
	tailored   []string                  // SetEnv, SetQuota and UpdateLimits calls, in order
	diskUsed   int64                     // GroupUsage's answer
	settle     chan func(error)          // set: snapshots answer before written; the test settles each
	writeBacks []string                  // CommandEnded calls
	// duringPause, when set, runs inside Pause before the sandbox is
	// frozen (with no lock of the fake held).
	duringPause func(id string)
	// duringRollback, when set, runs inside Rollback before the rollback
	// is recorded (with no lock of the fake held).
	duringRollback func()
	// hangDestroy holds Destroy of the sandboxes it names until the
	// channel is closed (a runtime call that hangs).
	hangDestroy map[string]chan struct{}
	destroyErr  error // Destroy's answer (after it has forgotten the sandbox)
}

func newFakeHost() *fakeHost {
	return &fakeHost{templates: map[string]bool{"base": true}, alive: map[string]bool{}, networks: map[string]network.Policy{}, images: map[string]bool{}, frozen: map[string]bool{}}
}

func (h *fakeHost) Create(ctx context.Context, spec sandbox.Spec) (*sandbox.Sandbox, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failNext != nil {
		err := h.failNext
		h.failNext = nil
		return nil, err
	}
	if !h.templates[spec.Template] {
		return nil, fmt.Errorf("template %q: %w", spec.Template, errdefs.ErrNotFound)
	}
	if spec.Snapshot != "" && !h.snaps[spec.Snapshot] {
		return nil, fmt.Errorf("snapshot %q: %w", spec.Snapshot, errdefs.ErrNotFound)
	}
	h.alive[spec.ID] = true
	h.lastSpec = spec
	if spec.Network != nil {
		h.networks[spec.ID] = *spec.Network
	}
	return &sandbox.Sandbox{ID: spec.ID}, nil
}

func (h *fakeHost) Recover(ctx context.Context, id string) (*sandbox.Sandbox, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.alive[id] {
		return nil, fmt.Errorf("gone: %w", errdefs.ErrUnavailable)
	}
	st := runtime.StateRunning
	if h.frozen[id] {
		st = runtime.StatePaused
	}
	return &sandbox.Sandbox{ID: id, Status: runtime.Status{ID: id, State: st}}, nil
}

func (h *fakeHost) Destroy(ctx context.Context, id string, _ *agentconn.Conn) error {
	h.mu.Lock()
	hang := h.hangDestroy[id]
	h.mu.Unlock()
	if hang != nil {
		<-hang
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.alive, id)
	delete(h.networks, id)
	h.destroyed = append(h.destroyed, id)
	return h.destroyErr
}

func (h *fakeHost) Reconcile(ctx context.Context, keep map[string]bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reconcile = keep
	return nil
}

func (h *fakeHost) Alive(ctx context.Context, id string) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.alive[id], nil
}

func (h *fakeHost) WaitSettled() {}

func (h *fakeHost) CommandStarted(id string) {}

func (h *fakeHost) CommandEnded(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.writeBacks = append(h.writeBacks, id)
}

func (h *fakeHost) Snapshot(ctx context.Context, id, snapID, group string, settled func(storage.Info, error)) (sandbox.SnapshotResult, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.alive[id] {
		return sandbox.SnapshotResult{}, fmt.Errorf("no sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if h.snaps == nil {
		h.snaps = map[string]bool{}
	}
	h.snaps[snapID] = true
	if h.settle != nil && settled != nil {
		// Answered before written: the test settles it.
		h.settle <- func(err error) {
			if err != nil {
				h.mu.Lock()
				delete(h.snaps, snapID)
				h.mu.Unlock()
				settled(storage.Info{}, err)
				return
			}
			settled(fakeSnapshotInfo, nil)
		}
		return sandbox.SnapshotResult{Info: storage.Info{ExclusiveBytes: -1, ReferencedBytes: -1}, Settling: true}, nil
	}
	return sandbox.SnapshotResult{}, nil
}

func (h *fakeHost) SnapshotStopped(ctx context.Context, id, snapID, group string) (sandbox.SnapshotResult, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.alive[id] && !h.frozen[id] { // a frozen (paused) tree is at rest too: a move snapshots it so
		return sandbox.SnapshotResult{}, fmt.Errorf("sandbox %s is running; SnapshotStopped would not freeze it", id)
	}
	if h.snaps == nil {
		h.snaps = map[string]bool{}
	}
	h.snaps[snapID] = true
	return sandbox.SnapshotResult{Info: fakeSnapshotInfo}, nil
}

// fakeSnapshotInfo is the sizes the fake reports for a written snapshot.
var fakeSnapshotInfo = storage.Info{ExclusiveBytes: 4096, ReferencedBytes: 65536}

func (h *fakeHost) DeleteSnapshot(ctx context.Context, snapID string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.snaps, snapID)
	return nil
}

func (h *fakeHost) Rollback(ctx context.Context, spec sandbox.Spec, snapID string, _ *agentconn.Conn) error {
	if h.duringRollback != nil {
		h.duringRollback()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.snaps[snapID] {
		return fmt.Errorf("snapshot %s: %w", snapID, errdefs.ErrNotFound)
	}
	h.rolledBack = append(h.rolledBack, spec.ID+"->"+snapID)
	return nil
}

func (h *fakeHost) Diff(ctx context.Context, from, to string, toLive bool) ([]storage.Change, error) {
	return nil, nil
}

func (h *fakeHost) ReadVolumeFile(id string, live bool, path string, limit int64) ([]byte, bool, error) {
	return nil, false, nil
}

func (h *fakeHost) GroupUsage(ctx context.Context, group string) (int64, int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.diskUsed == 0 {
		return -1, 0, errdefs.ErrUnsupported
	}
	return h.diskUsed, 0, nil
}

func (h *fakeHost) ReconcileSnapshots(ctx context.Context, keep map[string]bool) error { return nil }

func (h *fakeHost) SnapshotInfo(ctx context.Context, snapID string) (storage.Info, error) {
	if !h.HasSnapshot(ctx, snapID) {
		return storage.Info{}, errdefs.ErrNotFound
	}
	return fakeSnapshotInfo, nil
}

func (h *fakeHost) HasSnapshot(ctx context.Context, snapID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.snaps[snapID]
}

func (h *fakeHost) Pause(ctx context.Context, id string) error {
	if h.duringPause != nil {
		h.duringPause(id)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.alive[id] {
		return errdefs.ErrNotFound
	}
	h.frozen[id] = true
	return nil
}

func (h *fakeHost) PrimeFirstCommand(ctx context.Context, sb *sandbox.Sandbox) error { return nil }

func (h *fakeHost) Stop(ctx context.Context, id string, grace time.Duration, _ *agentconn.Conn) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.alive, id)
	return true, nil
}

func (h *fakeHost) UpdateLimits(ctx context.Context, id string, l runtime.Limits) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tailored = append(h.tailored, fmt.Sprintf("limits %s %d/%d/%d", id, l.MemoryBytes>>20, l.CPUMillis, l.Pids))
	return nil
}

func (h *fakeHost) SetEnv(ctx context.Context, sb *sandbox.Sandbox, env map[string]string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tailored = append(h.tailored, fmt.Sprintf("env %s %v", sb.ID, env))
	return h.failNext
}

func (h *fakeHost) SetQuota(ctx context.Context, group string, bytes int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tailored = append(h.tailored, fmt.Sprintf("quota %s %d", group, bytes>>20))
	return nil
}

func (h *fakeHost) Resume(ctx context.Context, id string, _ *agentconn.Conn) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.frozen, id)
	return nil
}

func newManager(t testing.TB, max int) (*Manager, *fakeHost, *store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.PutTemplate(context.Background(), store.Template{Name: "base", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	h := newFakeHost()
	m := New(Config{RuntimeName: "fake", MaxSandboxes: max, DefaultLimits: runtime.DefaultLimits,
		MaxLimits: runtime.Limits{MemoryBytes: 1 << 30, CPUMillis: 4000, Pids: 4096}, DefaultTimeout: time.Minute},
		st, h, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return m, h, st
}

func TestCreateGetDeleteAndTeams(t *testing.T) {
	ctx := context.Background()
	m, h, _ := newManager(t, 10)
	rec, err := m.Create(ctx, CreateRequest{Team: "a", Metadata: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != StateRunning || rec.Template != "base" || rec.MemoryBytes != 512<<20 || rec.EndAt.IsZero() {
		t.Fatalf("created: %+v", rec)
	}
	if _, err := m.Get(ctx, "b", rec.ID); !errdefs.IsNotFound(err) {
		t.Fatalf("other team get: %v", err)
	}
	if err := m.Delete(ctx, "b", rec.ID); !errdefs.IsNotFound(err) {
		t.Fatalf("other team delete: %v", err)
	}
	if list, _ := m.List(ctx, "b", store.SandboxFilter{}); len(list) != 0 {
		t.Fatalf("other team list: %v", list)
	}
	if err := m.Delete(ctx, "a", rec.ID); err != nil {
		t.Fatal(err)
	}
	if h.alive[rec.ID] {
		t.Fatal("host still has the sandbox")
	}
	if _, err := m.Get(ctx, "a", rec.ID); !errdefs.IsNotFound(err) {
		t.Fatalf("get after delete: %v", err)
	}
}

func TestCreateRejectsBadInputAndLeavesNoRecord(t *testing.T) {
	ctx := context.Background()
	m, _, st := newManager(t, 10)
	neg := -time.Second
	bad := []CreateRequest{
		{Team: "a", Template: "../x"},
		{Team: "a", Timeout: &neg},
		{Team: "a", Limits: runtime.Limits{MemoryBytes: 1 << 40}},
		{Team: "a", Limits: runtime.Limits{MemoryBytes: 1 << 10}},
		{Team: "a", Limits: runtime.Limits{Pids: 5}},
		{Team: "a", Limits: runtime.Limits{CPUMillis: 1 << 20}},
		{Team: "a", Env: map[string]string{"1BAD": "x"}},
		{Team: "a", Env: map[string]string{"A": "x\x00y"}},
		{Team: "BAD TEAM"},
	}
	for i, req := range bad {
		if _, err := m.Create(ctx, req); !errdefs.IsInvalid(err) {
			t.Errorf("case %d: want ErrInvalid, got %v", i, err)
		}
	}
	if _, err := m.Create(ctx, CreateRequest{Team: "a", Template: "nope"}); !errdefs.IsNotFound(err) {
		t.Fatalf("unknown template: %v", err)
	}
	if n, _ := st.CountSandboxes(ctx); n != 0 {
		t.Fatalf("%d records left behind by rejected creates", n)
	}
}

func TestMaxSandboxesUnderConcurrency(t *testing.T) {
	ctx := context.Background()
	m, _, _ := newManager(t, 3)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, full := 0, 0
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := m.Create(ctx, CreateRequest{Team: "a"})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errdefs.IsResourceExhausted(err):
				full++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok != 3 || full != 7 {
		t.Fatalf("created %d, refused %d; want 3 and 7", ok, full)
	}
}

func TestHostFailureMarksFailed(t *testing.T) {
	ctx := context.Background()
	m, h, st := newManager(t, 10)
	h.failNext = errors.New("boom")
	if _, err := m.Create(ctx, CreateRequest{Team: "a"}); err == nil {
		t.Fatal("want an error")
	}
	list, _ := st.ListSandboxes(ctx, store.SandboxFilter{})
	if len(list) != 1 || list[0].State != StateFailed || list[0].Reason == "" {
		t.Fatalf("records: %+v", list)
	}
	// A failed sandbox does not count against the limit and can be deleted.
	if err := m.Delete(ctx, "a", list[0].ID); err != nil {
		t.Fatal(err)
	}
}

func TestRecover(t *testing.T) {
	ctx := context.Background()
	m, h, st := newManager(t, 10)
	live, _ := m.Create(ctx, CreateRequest{Team: "a"})
	dead, _ := m.Create(ctx, CreateRequest{Team: "a"})
	half := store.Sandbox{ID: "halfmade", Team: "a", Template: "base", Runtime: "fake", State: StateCreating, CreatedAt: time.Now()}
	if err := st.CreateSandbox(ctx, half); err != nil {
		t.Fatal(err)
	}
	delete(h.alive, dead.ID) // died while the daemon was away

	m2 := New(m.cfg, st, h, m.log)
	if err := m2.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if !h.reconcile[live.ID] || h.reconcile[dead.ID] || h.reconcile["halfmade"] {
		t.Fatalf("reconcile keep set: %v", h.reconcile)
	}
	for id, want := range map[string]store.SandboxState{live.ID: StateRunning, dead.ID: StateFailed, "halfmade": StateFailed} {
		rec, err := st.GetSandbox(ctx, id)
		if err != nil || rec.State != want {
			t.Fatalf("%s: %v %v, want %s", id, rec.State, err, want)
		}
	}
	if _, err := m2.Agent(ctx, "a", dead.ID); !errdefs.IsConflict(err) {
		t.Fatalf("agent of a failed sandbox: %v", err)
	}
}

func TestTimeoutKills(t *testing.T) {
	ctx := context.Background()
	m, h, _ := newManager(t, 10)
	now := time.Now()
	m.cfg.Now = func() time.Time { return now }
	var fired []string
	m.cfg.OnTimeout = func(timeout, action string) { fired = append(fired, timeout+"/"+action) }
	short := 10 * time.Second
	never := time.Duration(0)
	a, _ := m.Create(ctx, CreateRequest{Team: "a", Timeout: &short})
	b, _ := m.Create(ctx, CreateRequest{Team: "a", Timeout: &never})
	now = now.Add(time.Minute)
	m.expire(ctx)
	m.actions.Wait()
	if h.alive[a.ID] || !h.alive[b.ID] {
		t.Fatalf("after expiry: a alive=%v b alive=%v", h.alive[a.ID], h.alive[b.ID])
	}
	if len(fired) != 1 || fired[0] != "run/kill" {
		t.Fatalf("OnTimeout heard %v, want [run/kill]", fired)
	}
}

func TestTransitions(t *testing.T) {
	if !canTransition(StateCreating, StateRunning) || canTransition(StateDestroyed, StateRunning) || canTransition(StateFailed, StateRunning) {
		t.Fatal("transition table")
	}
	if err := checkTransition("x", StateDestroyed, StateDestroyed); !errdefs.IsConflict(err) {
		t.Fatalf("destroyed twice: %v", err)
	}
}

func TestWatchFailsDeadSandboxes(t *testing.T) {
	ctx := context.Background()
	m, h, st := newManager(t, 10)
	a, _ := m.Create(ctx, CreateRequest{Team: "a"})
	b, _ := m.Create(ctx, CreateRequest{Team: "a"})
	h.mu.Lock()
	delete(h.alive, a.ID)
	h.mu.Unlock()
	m.watch(ctx)
	m.actions.Wait()
	ra, _ := st.GetSandbox(ctx, a.ID)
	rb, _ := st.GetSandbox(ctx, b.ID)
	if ra.State != StateFailed || ra.Reason == "" || rb.State != StateRunning {
		t.Fatalf("after watch: a=%s (%q) b=%s", ra.State, ra.Reason, rb.State)
	}
	if _, err := m.Agent(ctx, "a", a.ID); !errdefs.IsConflict(err) {
		t.Fatalf("agent of a dead sandbox: %v", err)
	}
	if err := m.Delete(ctx, "a", a.ID); err != nil {
		t.Fatalf("delete a failed sandbox: %v", err)
	}
}

// A daemon that died with a sandbox frozen for a snapshot leaves it frozen
// under a running record; one that died between freezing and recording a
// pause leaves the opposite. The next daemon makes them agree.
func TestRecoverMatchesRecords(t *testing.T) {
	m, h, st := newManager(t, 10)
	ctx := context.Background()
	running, err := m.Create(ctx, CreateRequest{Team: "t", Template: "base"})
	if err != nil {
		t.Fatal(err)
	}
	paused, err := m.Create(ctx, CreateRequest{Team: "t", Template: "base"})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Pause(ctx, "t", paused.ID); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	h.frozen[running.ID] = true // frozen mid-snapshot
	delete(h.frozen, paused.ID) // thawed, the record says paused
	h.mu.Unlock()

	m2 := New(m.cfg, st, h, m.log)
	if err := m2.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	runningFrozen, pausedFrozen := h.frozen[running.ID], h.frozen[paused.ID]
	h.mu.Unlock()
	if runningFrozen {
		t.Errorf("a running sandbox left frozen by the last daemon is still frozen")
	}
	if !pausedFrozen {
		t.Errorf("a paused sandbox whose processes run was not frozen again")
	}
	for id, want := range map[string]store.SandboxState{running.ID: StateRunning, paused.ID: StatePaused} {
		if got, _ := m2.Get(ctx, "t", id); got.State != want {
			t.Errorf("sandbox %s is %s, want %s", id, got.State, want)
		}
	}
}

func TestCommandsInFlightCountsEverySandbox(t *testing.T) {
	m, _, _ := newManager(t, 10)
	sa, err := m.Create(context.Background(), CreateRequest{Team: "a"})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := m.Create(context.Background(), CreateRequest{Team: "b"})
	if err != nil {
		t.Fatal(err)
	}
	a1, a2, b := acquire(t, m, "a", sa.ID), acquire(t, m, "a", sa.ID), acquire(t, m, "b", sb.ID)
	if n := m.CommandsInFlight(); n != 3 {
		t.Fatalf("CommandsInFlight = %d, want 3", n)
	}
	a1()
	a1() // ending twice counts once
	b()
	if n := m.CommandsInFlight(); n != 1 {
		t.Fatalf("CommandsInFlight = %d, want 1", n)
	}
	a2()
	if n := m.CommandsInFlight(); n != 0 {
		t.Fatalf("CommandsInFlight = %d, want 0", n)
	}
}

// A live disk quota is set on the sandbox's group and recorded; one below
// what the sandbox holds is refused with a conflict.
func TestUpdateDiskQuota(t *testing.T) {
	ctx := context.Background()
	m, h, _ := newManager(t, 10)
	rec, err := m.Create(ctx, CreateRequest{Team: "a"})
	if err != nil {
		t.Fatal(err)
	}
	h.diskUsed = 40 << 20
	got, err := m.UpdateLimits(ctx, "a", rec.ID, runtime.Limits{}, 64<<20)
	if err != nil || got.QuotaBytes != 64<<20 {
		t.Fatalf("raise to 64 MiB: %+v %v", got, err)
	}
	if last := h.tailored[len(h.tailored)-1]; last != "quota "+rec.ID+" 64" {
		t.Fatalf("host calls: %v", h.tailored)
	}
	if _, err := m.UpdateLimits(ctx, "a", rec.ID, runtime.Limits{}, 32<<20); !errdefs.IsConflict(err) || !strings.Contains(err.Error(), "holds 40 MiB") {
		t.Fatalf("below use: %v", err)
	}
	if _, err := m.UpdateLimits(ctx, "a", rec.ID, runtime.Limits{}, 1<<20); !errdefs.IsInvalid(err) {
		t.Fatalf("1 MiB: %v", err)
	}
	if got, _ := m.Get(ctx, "a", rec.ID); got.QuotaBytes != 64<<20 {
		t.Fatalf("a refused change was recorded: %d", got.QuotaBytes)
	}
}
