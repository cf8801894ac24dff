package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warrenhq/warren/internal/kube/controller"
	"github.com/warrenhq/warren/internal/kube/fleet"
)

// shutdownGrace is how long in-flight requests get to finish at a stop;
// streams still open after it are cut.
const shutdownGrace = 10 * time.Second

// New connects a gateway to the cluster rc reaches: it makes the fleet's
// admin key if it is missing and waits for its watch caches, which run
// until ctx ends. placer nil is MostFreeMemory.
func New(ctx context.Context, cfg Config, rc *rest.Config, log *slog.Logger, placer Placer) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.GatewayID == "" {
		cfg.GatewayID = defaultGatewayID()
	}
	scheme, err := fleet.NewScheme()
	if err != nil {
		return nil, err
	}
	api, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if err := ensureFleetKey(ctx, api, cfg.Namespace); err != nil {
		return nil, err
	}
	view, err := newFleetView(ctx, rc, scheme, cfg.Namespace)
	if err != nil {
		return nil, err
	}
	if err := view.start(ctx); err != nil {
		return nil, err
	}
	if placer == nil {
		placer = MostFreeMemory{}
	}
	keys := &keyStore{cache: view.cache, teams: view, api: api, namespace: cfg.Namespace}
	return newGateway(cfg, log, view, keys, placer), nil
}

// Run serves the gateway on cfg.Listen until ctx ends, then stops
// gracefully.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	_, rc, err := fleet.NewClient(cfg.Kubeconfig)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	defer ln.Close()
	if cfg.GatewayID == "" {
		cfg.GatewayID = defaultGatewayID()
	}
	g, err := New(ctx, cfg, rc, log, NewFleetPlacer(cfg.PlacementSample))
	if err != nil {
		return err
	}
	var ctrl *controller.Controller
	if cfg.Controllers {
		if ctrl, err = controller.New(controller.Options{Config: rc, Namespace: cfg.Namespace, Identity: cfg.GatewayID,
			Sample: cfg.PlacementSample, Replicate: cfg.Replicate, DrainOnCordon: cfg.DrainOnCordon, Mover: fleetMover{keys: g.keys, moves: g.moves}, Log: log}); err != nil {
			return err
		}
	}
	ctrlDone := make(chan struct{})
	ctrlCtx, stopCtrl := context.WithCancel(ctx)
	// It gives up its election Lease before the gateway exits.
	defer func() { stopCtrl(); <-ctrlDone }()
	go func() {
		defer close(ctrlDone)
		if ctrl == nil {
			return
		}
		// It campaigns again after a lost term; an error here is one it
		// cannot recover from, and the gateway keeps routing.
		if err := ctrl.Run(ctrlCtx); err != nil && ctrlCtx.Err() == nil {
			log.Error("the fleet's controller stopped; this replica routes but no longer takes part in the election", "err", err)
		}
	}()
	srv := &http.Server{Handler: g, ReadHeaderTimeout: 30 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("gateway serving", "listen", ln.Addr().String(), "namespace", cfg.Namespace, "id", cfg.GatewayID)
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", cfg.Listen, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("stop serving: %w", err)
	}
	_ = srv.Close() // cut the streams that outlived the grace
	return nil
}
