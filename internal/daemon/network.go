package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/network"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/sandboxlog"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/store"
)

// newNetworks prepares (without starting) the sandboxes' network: it is
// started by the first sandbox that asks for one, or at start when an
// earlier run left networked sandboxes.
func newNetworks(cfg config.Config, audit *networkAudit, log *slog.Logger) (*sandbox.Networks, error) {
	if !cfg.Network.Enabled {
		return nil, nil
	}
	permit, err := cfg.NetworkPermits()
	if err != nil {
		return nil, err
	}
	return &sandbox.Networks{
		Owner: cfg.DataDir,
		Options: network.Options{
			RunDir:     cfg.Network.RunDir,
			NetNS:      cfg.Network.NetNS,
			Bridge:     cfg.Network.Bridge,
			Table:      cfg.Network.Table,
			VethPrefix: cfg.Network.VethPrefix,
			LogGroup:   cfg.Network.LogGroup,
			Subnet:     cfg.NetworkSubnet(),
			Uplink:     cfg.Network.Uplink,
			Upstream:   cfg.Network.DNS,
			Permit:     permit,
			OnEvent:    audit.add,
			Log:        log.With("component", "network"),
		},
	}, nil
}

// startNetworkIfNeeded starts the network before the sandboxes are
// recovered when an earlier run left any with a network: they are adopted,
// and what no record names is removed.
func startNetworkIfNeeded(ctx context.Context, n *sandbox.Networks, st *store.Store, log *slog.Logger) {
	if n == nil {
		return
	}
	need := n.LeftBehind()
	if !need {
		recs, err := st.ListSandboxes(ctx, store.SandboxFilter{States: []store.SandboxState{session.StateRunning, session.StatePaused, session.StateCreating}})
		if err != nil {
			log.Warn("list sandboxes for their networks", "err", err)
		}
		for _, r := range recs {
			if r.Network != nil {
				need = true
				break
			}
		}
	}
	if !need {
		return
	}
	if _, err := n.Start(); err != nil {
		log.Error("networked sandboxes from an earlier run, but the network cannot start; their last rules stay in force", "err", err)
	}
}

// networkAudit moves the network's audit events into the store and the
// sandboxes' logs, off the audit's goroutine (which must not block): a
// bounded queue, written in batches. When the queue is full, events are
// dropped and counted.
type networkAudit struct {
	store   *store.Store
	logs    *sandboxlog.Logs
	log     *slog.Logger
	ch      chan network.Event
	dropped atomic.Int64
	done    chan struct{}
	once    sync.Once
}

const (
	auditQueue = 8192
	auditBatch = 512
)

func newNetworkAudit(st *store.Store, logs *sandboxlog.Logs, log *slog.Logger) *networkAudit {
	a := &networkAudit{store: st, logs: logs, log: log, ch: make(chan network.Event, auditQueue), done: make(chan struct{})}
	go a.run()
	return a
}

func (a *networkAudit) add(e network.Event) {
	select {
	case a.ch <- e:
	default:
		a.dropped.Add(1)
	}
}

func (a *networkAudit) run() {
	defer close(a.done)
	batch := make([]store.NetworkEvent, 0, auditBatch)
	for e := range a.ch {
		batch = append(batch[:0], a.record(e))
	more:
		for len(batch) < auditBatch {
			select {
			case e, ok := <-a.ch:
				if !ok {
					break more
				}
				batch = append(batch, a.record(e))
			default:
				break more
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := a.store.AddNetworkEvents(ctx, batch); err != nil {
			a.log.Warn("record network audit events", "events", len(batch), "err", err)
		}
		cancel()
		if n := a.dropped.Swap(0); n > 0 {
			a.log.Warn("network audit: events dropped (the store fell behind)", "events", n)
		}
	}
}

// record logs one event in its sandbox's log and returns its stored form.
func (a *networkAudit) record(e network.Event) store.NetworkEvent {
	level := "info"
	if e.Verdict == network.VerdictDeny {
		level = "warn"
	}
	a.logs.Event(e.SandboxID, level, auditLine(e))
	dst := ""
	if e.Dst.IsValid() {
		dst = e.Dst.String()
	}
	return store.NetworkEvent{SandboxID: e.SandboxID, At: e.Time, Verdict: e.Verdict, Reason: e.Reason,
		Protocol: e.Protocol, Destination: dst, Port: int(e.Port), Domain: e.Domain}
}

// auditLine is an event as a line of the sandbox's log, e.g.
// "network: deny tcp 169.254.169.254:80 (reserved)" or
// "network: allow dns lookup of api.example.com (domain)".
func auditLine(e network.Event) string {
	if e.Protocol == "dns" {
		return fmt.Sprintf("network: %s dns lookup of %s (%s)", e.Verdict, e.Domain, e.Reason)
	}
	dst := e.Dst.String()
	if e.Port != 0 {
		dst = fmt.Sprintf("%s:%d", dst, e.Port)
	}
	if e.Domain != "" {
		dst += " [" + e.Domain + "]"
	}
	return fmt.Sprintf("network: %s %s %s (%s)", e.Verdict, e.Protocol, dst, e.Reason)
}

// close drains the queue; call it after the network manager is closed.
func (a *networkAudit) close() {
	a.once.Do(func() { close(a.ch) })
	<-a.done
}
