// Package controller holds the gateway's leader-elected loops over the
// fleet's Kubernetes objects: it places Sandbox objects that arrive without a
// node (a kubectl apply) with the same placement as the gateway's creates,
// marks the sandboxes of a node whose Lease lapsed Lost, keeps a copy
// of every sandbox at rest on another node to restore it from, and takes a
// cordon of a warren node's Kubernetes Node (kubectl drain) to the node:
// no new sandboxes, and, when asked, its sandboxes moved off. Any number of
// gateways run it; a Lease (warren-controller) elects the one that acts, and
// a gateway that loses the Lease stops acting and campaigns again.
package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/kube/fleet"
	"github.com/warrenhq/warren/internal/placement"
)

// LeaseName is the Lease the gateways' controllers elect their leader with.
const LeaseName = "warren-controller"

// Options configure a Controller; zero durations take the defaults.
type Options struct {
	// Config reaches the API server; Namespace holds the Sandbox objects,
	// the nodes' Leases and the election's Lease.
	Config    *rest.Config
	Namespace string
	// Identity names this controller in the election (the gateway's id).
	Identity string
	// Sample is placement's K (--placement-sample).
	Sample int
	// Election timing (client-go's): a leader that cannot renew within
	// RenewDeadline stops acting; another takes over LeaseDuration after
	// the last renewal. Defaults 15s, 10s, 2s.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// RetryMin and RetryMax bound the backoff of a Sandbox no node can
	// take (defaults 1s and 30s).
	RetryMin time.Duration
	RetryMax time.Duration
	// Replicate keeps a copy of every paused or hibernated sandbox on
	// another node, from which it is restored if its node is lost
	// (--replicate).
	Replicate bool
	// Mover, when set, lets the controller drain the warren node of a
	// cordoned Kubernetes Node: one annotated warren.dev/drain=true, or
	// any with DrainOnCordon unless annotated "false" (--drain-on-cordon).
	Mover         Mover
	DrainOnCordon bool
	Log           *slog.Logger
}

// Controller runs the loops while it leads.
type Controller struct {
	opts   Options
	log    *slog.Logger
	scheme *runtime.Scheme
	rng    *rand.Rand
}

// New checks opts and fills in the defaults.
func New(opts Options) (*Controller, error) {
	if opts.Config == nil {
		return nil, fmt.Errorf("controller: no API server config: %w", errdefs.ErrInvalid)
	}
	if opts.Identity == "" {
		return nil, fmt.Errorf("controller: an identity is needed to take part in the election (--gateway-id): %w", errdefs.ErrInvalid)
	}
	if opts.Namespace == "" {
		opts.Namespace = fleet.DefaultNamespace
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&opts.LeaseDuration, 15*time.Second)
	def(&opts.RenewDeadline, 10*time.Second)
	def(&opts.RetryPeriod, 2*time.Second)
	def(&opts.RetryMin, time.Second)
	def(&opts.RetryMax, 30*time.Second)
	if opts.RenewDeadline >= opts.LeaseDuration {
		return nil, fmt.Errorf("controller: renew deadline %v must be shorter than the lease duration %v: %w", opts.RenewDeadline, opts.LeaseDuration, errdefs.ErrInvalid)
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	scheme, err := fleet.NewScheme()
	if err != nil {
		return nil, err
	}
	setLoggerOnce.Do(func() {
		sink := logr.FromSlogHandler(opts.Log.Handler())
		ctrllog.SetLogger(sink)
		klog.SetLogger(sink) // client-go's election logs, else klog's own format on stderr
	})
	return &Controller{
		opts:   opts,
		log:    opts.Log.With("component", "controller", "identity", opts.Identity),
		scheme: scheme,
		rng:    rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}, nil
}

// setLoggerOnce gives controller-runtime's and client-go's global loggers
// the first controller's: without one controller-runtime prints a warning
// with a stack trace instead of its logs.
var setLoggerOnce sync.Once

// Run campaigns for the election's Lease and runs the loops while it holds
// it, until ctx ends; it then gives the Lease up so that another gateway
// takes over at once.
func (c *Controller) Run(ctx context.Context) error {
	clients, err := kubernetes.NewForConfig(c.opts.Config)
	if err != nil {
		return fmt.Errorf("controller: clients: %w", err)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: c.opts.Namespace, Name: LeaseName},
		Client:     clients.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: c.opts.Identity},
	}
	for ctx.Err() == nil {
		if err := c.campaign(ctx, lock); err != nil {
			c.log.Error("leading failed; campaigning again", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(c.opts.RetryPeriod):
			}
		}
	}
	return nil
}

// campaign waits for the Lease, runs the loops while it is held, and
// returns when it is lost (nil) or the loops failed (their error, after
// giving the Lease up).
func (c *Controller) campaign(ctx context.Context, lock resourcelock.Interface) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The term runs here rather than in client-go's goroutine, so that a
	// term has ended before the next campaign or Run's return.
	terms := make(chan context.Context)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            LeaseName,
		LeaseDuration:   c.opts.LeaseDuration,
		RenewDeadline:   c.opts.RenewDeadline,
		RetryPeriod:     c.opts.RetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(term context.Context) {
				select {
				case terms <- term:
				case <-term.Done():
				}
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	elected := make(chan struct{})
	go func() {
		defer close(elected)
		le.Run(ctx)
	}()
	var termErr error
	select {
	case term := <-terms:
		c.log.Info("leading: placing sandboxes and watching node leases", "namespace", c.opts.Namespace)
		termErr = c.lead(term)
		cancel() // the loops failed: give the Lease up
		c.log.Info("no longer leading")
	case <-elected:
	}
	<-elected
	if termErr != nil && !errors.Is(termErr, context.Canceled) {
		return termErr
	}
	return nil
}

// lead runs the loops until term ends: a controller-runtime manager of
// its own per term (a manager starts once), without its own election.
func (c *Controller) lead(term context.Context) error {
	mgr, err := manager.New(c.opts.Config, manager.Options{
		Scheme: c.scheme,
		Logger: logr.FromSlogHandler(c.log.Handler()),
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{c.opts.Namespace: {}},
		},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// A term's controllers have the names of the last term's.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return fmt.Errorf("controller manager: %w", err)
	}
	if err := c.setup(term, mgr); err != nil {
		return err
	}
	return mgr.Start(term)
}

// setup registers the loops with mgr.
func (c *Controller) setup(ctx context.Context, mgr manager.Manager) error {
	if err := indexSandboxes(ctx, mgr); err != nil {
		return err
	}
	p := &placer{
		client:   mgr.GetClient(),
		reader:   mgr.GetAPIReader(),
		ns:       c.opts.Namespace,
		identity: c.opts.Identity,
		policy:   placement.Policy{Sample: c.opts.Sample},
		rng:      c.rng,
		retryMin: c.opts.RetryMin,
		retryMax: c.opts.RetryMax,
		log:      c.log,
	}
	if err := p.setup(mgr); err != nil {
		return err
	}
	w := &lossWatcher{client: mgr.GetClient(), reader: mgr.GetAPIReader(), ns: c.opts.Namespace, log: c.log}
	if err := w.setup(mgr); err != nil {
		return err
	}
	if err := c.setupDrainer(ctx, mgr); err != nil {
		return err
	}
	if !c.opts.Replicate {
		return nil
	}
	r := &replicator{
		client: mgr.GetClient(), reader: mgr.GetAPIReader(), ns: c.opts.Namespace,
		policy: placement.Policy{Sample: c.opts.Sample}, http: &http.Client{}, log: c.log,
		rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}
	return r.setup(mgr)
}
