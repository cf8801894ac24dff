// Package node is warren's node mode (`warren serve --cluster kubernetes`):
// the daemon keeps its SQLite as the truth for its own sandboxes and mirrors
// it into the Kubernetes API server — its Lease, its WarrenNode status, a
// Sandbox object per sandbox — and, the other way, runs the Sandbox objects
// assigned to it and authenticates the fleet's API keys. Each job is its own
// loop; an API server outage after start is logged and retried, and never
// touches a sandbox.
package node

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/store"
)

// Sandboxes is what node mode needs of the session service
// (*session.Manager).
type Sandboxes interface {
	List(ctx context.Context, team string, f store.SandboxFilter) ([]store.Sandbox, error)
	Create(ctx context.Context, req session.CreateRequest) (store.Sandbox, error)
	Delete(ctx context.Context, team, id string) error
	Forget(ctx context.Context, id string) error
	PruneReplicas(ctx context.Context, team, sandboxID string, keep int) error
	ReplicaSnapshots(ctx context.Context) ([]store.Snapshot, error)
}

// Keys is what the key sync needs of the store.
type Keys interface {
	SyncFleetKeys(ctx context.Context, keys []store.FleetKey) (skipped []error, err error)
}

// Reporter says what the node has and uses, for its WarrenNode status.
type Reporter interface {
	Report(ctx context.Context) (Report, error)
}

// Report is a node's capacity and use.
type Report struct {
	Capacity, Used Resources
	Runtimes       []string
	Templates      []string
	// Devices a new sandbox can be given now (CDI names).
	Devices       []string
	SnapshotCount int64
	SnapshotBytes int64
}

// Resources are amounts of what sandboxes take.
type Resources struct {
	MemoryBytes, CPUMillis, DiskBytes int64
	Sandboxes                         int32
}

// Config is what node mode is told.
type Config struct {
	Client    client.Client
	Namespace string
	// Node names the WarrenNode, the Lease (fleet.LeaseName) and the
	// warren.dev/node label of the node's Sandbox objects.
	Node string
	// Endpoint is the node's API URL as the gateway reaches it.
	Endpoint      string
	Version       string
	LeaseDuration time.Duration
	Sandboxes     Sandboxes
	Keys          Keys
	Reporter      Reporter
	Log           *slog.Logger
	// Pools, if set, follows the fleet's SandboxPool objects with the
	// node's warm pools, on top of BasePools (its --pool flags).
	Pools     Pools
	BasePools []session.PoolConfig
	// Runtimes are the sandbox runtimes this node has; a SandboxPool asking
	// for another is not kept here (nil: any).
	Runtimes []string

	// The loops' periods; zero: the defaults below (tests shorten them).
	SandboxEvery, StatusEvery, KeyEvery, PoolEvery, ReplicaEvery time.Duration
}

// Default periods. Sandbox objects follow their sandboxes within about a
// second (sooner on a nudge); a key Secret authenticates within KeyEvery.
const (
	DefaultSandboxEvery = time.Second
	DefaultStatusEvery  = 10 * time.Second
	DefaultKeyEvery     = 2 * time.Second
	DefaultPoolEvery    = 5 * time.Second
	// DefaultLeaseDuration is how long the Lease says the node lives
	// without a renewal; it is renewed every third of that.
	DefaultLeaseDuration = 15 * time.Second
	startTimeout         = 15 * time.Second
	stopTimeout          = 2 * time.Second
	// The least time between two passes a nudge starts.
	sandboxGap = 100 * time.Millisecond
	statusGap  = time.Second
)

// Node runs node mode's loops until Close.
type Node struct {
	cfg Config
	log *slog.Logger
	// identity holds the node's Lease for this start (lease.go).
	identity string
	cancel   context.CancelFunc
	// closeOnce: Close may be called more than once (a test, the daemon).
	closeOnce sync.Once
	loops     sync.WaitGroup
	sandbox   chan struct{} // nudges the sandbox sync
	status    chan struct{} // nudges the WarrenNode status
	creates   *inflight
	// keysSkipped is why the last key sync skipped Secrets (its loop only).
	keysSkipped string
	// pools are the warm pools last set (the pool loop only).
	pools []session.PoolConfig
}

// Start checks that the API server answers (renewing the Lease and making
// sure the fleet's admin key exists), then starts the loops. An API server
// it cannot reach at start is an error: a node that would silently publish
// nothing is worse than one that does not start.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.SandboxEvery <= 0 {
		cfg.SandboxEvery = DefaultSandboxEvery
	}
	if cfg.StatusEvery <= 0 {
		cfg.StatusEvery = DefaultStatusEvery
	}
	if cfg.KeyEvery <= 0 {
		cfg.KeyEvery = DefaultKeyEvery
	}
	if cfg.PoolEvery <= 0 {
		cfg.PoolEvery = DefaultPoolEvery
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.ReplicaEvery <= 0 {
		cfg.ReplicaEvery = DefaultReplicaEvery
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	n := &Node{cfg: cfg, log: cfg.Log.With("component", "node"), identity: newIdentity(cfg.Node),
		sandbox: make(chan struct{}, 1), status: make(chan struct{}, 1), creates: newInflight()}
	// The claim may wait out a killed predecessor's Lease term.
	first, cancel := context.WithTimeout(ctx, startTimeout+cfg.LeaseDuration)
	defer cancel()
	if err := n.claimLease(first); errdefs.IsConflict(err) {
		return nil, fmt.Errorf("node mode: %w", err)
	} else if err != nil {
		return nil, fmt.Errorf("node mode: reach the Kubernetes API server (namespace %s must exist): %w", cfg.Namespace, err)
	}
	if err := n.ensureFleetAdmin(first); err != nil {
		return nil, fmt.Errorf("node mode: %w", err)
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	n.cancel = stop
	n.run(runCtx, "lease", cfg.LeaseDuration/3, 0, nil, n.renewLease)
	n.run(runCtx, "node status", cfg.StatusEvery, statusGap, n.status, n.publishNode)
	n.run(runCtx, "sandbox objects", cfg.SandboxEvery, sandboxGap, n.sandbox, n.syncSandboxes)
	n.watchSandboxes(runCtx)
	n.run(runCtx, "api keys", cfg.KeyEvery, 0, nil, n.syncKeys)
	n.run(runCtx, "replica sweep", cfg.ReplicaEvery, 0, nil, n.sweepReplicas)
	if cfg.Pools != nil {
		n.run(runCtx, "sandbox pools", cfg.PoolEvery, 0, nil, n.syncPools)
	}
	n.log.Info("node mode started", "node", cfg.Node, "namespace", cfg.Namespace, "endpoint", cfg.Endpoint)
	return n, nil
}

// Nudge asks the sandbox sync and the node status to run soon: a sandbox
// changed. It never blocks (the session service calls it on every event).
func (n *Node) Nudge() {
	for _, c := range []chan struct{}{n.sandbox, n.status} {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// Close stops the loops and waits for them and for creates in flight,
// then marks the WarrenNode not Ready (its API no longer serves) if the API
// server answers within a moment. Sandboxes and their objects stay as they
// are: the next start takes them up again.
func (n *Node) Close() {
	n.closeOnce.Do(func() {
		n.cancel()
		n.loops.Wait()
		n.creates.wait()
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if err := n.markStopped(ctx); err != nil {
			n.log.Warn("node mode: could not mark the WarrenNode not Ready", "err", err)
		}
		if err := n.releaseLease(ctx); err != nil {
			n.log.Warn("node mode: could not release the Lease (the next start waits for its term to lapse)", "err", err)
		}
	})
}

// run calls step now, then every period and on each nudge (but not
// sooner than minGap after the last call, so a burst of sandbox events
// makes a few writes, not one each), until ctx ends. A failure is logged
// when it starts and when it ends, not on every retry of an outage.
func (n *Node) run(ctx context.Context, what string, period, minGap time.Duration, nudge <-chan struct{}, step func(context.Context) error) {
	n.loops.Add(1)
	go func() {
		defer n.loops.Done()
		tick := time.NewTicker(period)
		defer tick.Stop()
		failing := false
		for {
			last := time.Now()
			err := step(ctx)
			switch {
			case ctx.Err() != nil:
				return
			case err != nil && !failing:
				n.log.Warn("node mode: "+what+" failed; retrying", "err", err)
			case err != nil:
				n.log.Debug("node mode: "+what+" still failing", "err", err)
			case failing:
				n.log.Info("node mode: " + what + " works again")
			}
			failing = err != nil
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			case <-nudge:
				if !sleep(ctx, minGap-time.Since(last)) {
					return
				}
			}
		}
	}()
}

// sleep waits d (nothing if d ≤ 0); false if ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// inflight holds the Sandbox objects whose sandbox is being created, so
// that a pass of the sync does not start a second one.
type inflight struct {
	mu   sync.Mutex
	uids map[string]bool
	wg   sync.WaitGroup
}

func newInflight() *inflight { return &inflight{uids: map[string]bool{}} }

// start runs fn for uid unless one runs already.
func (f *inflight) start(uid string, fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.uids[uid] {
		return
	}
	f.uids[uid] = true
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer func() {
			f.mu.Lock()
			delete(f.uids, uid)
			f.mu.Unlock()
		}()
		fn()
	}()
}

func (f *inflight) has(uid string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.uids[uid]
}

func (f *inflight) wait() { f.wg.Wait() }

// ignoreGone treats an object that is already gone as done.
func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
