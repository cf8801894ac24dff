package session

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/network"
	"github.com/warrenhq/warren/internal/store"
)

// networks applies sandboxes' egress policies and lists their network
// events.
type networks struct {
	*registry
	host  networkHost
	store networkStore
}

// Network policy decisions. A sandbox has a network only if its create asked
// for one (allowInternetAccess or an allowOut/denyOut list); the policy is
// kept in its record, re-applied when the daemon restarts, given to its
// forks, and replaced live by UpdateNetwork. A sandbox created without one
// keeps a namespace of its own with only loopback, for its whole life.

// storedPolicy is a policy as the record keeps it.
func storedPolicy(p *network.Policy) *store.NetworkPolicy {
	if p == nil {
		return nil
	}
	sp := store.NetworkPolicy{AllowInternetAccess: p.AllowInternetAccess, AllowOut: p.AllowOut, DenyOut: p.DenyOut}
	if e := p.EgressProxy; e != nil {
		sp.EgressProxy = &store.NetworkEgressProxy{Address: e.Address, Username: e.Username, Password: e.Password}
	}
	if p.Rules != nil {
		sp.Rules = make(map[string][]store.NetworkRule, len(p.Rules))
		for d, rules := range p.Rules {
			for _, r := range rules {
				var sr store.NetworkRule
				if r.Transform != nil {
					sr.Transform = &store.NetworkTransform{Headers: r.Transform.Headers}
				}
				sp.Rules[d] = append(sp.Rules[d], sr)
			}
		}
	}
	return &sp
}

// policyOf is the policy of a sandbox's record (nil: no network).
func policyOf(rec store.Sandbox) *network.Policy {
	if rec.Network == nil {
		return nil
	}
	n := rec.Network
	p := network.Policy{AllowInternetAccess: n.AllowInternetAccess, AllowOut: n.AllowOut, DenyOut: n.DenyOut}
	if e := n.EgressProxy; e != nil {
		p.EgressProxy = &network.EgressProxy{Address: e.Address, Username: e.Username, Password: e.Password}
	}
	if n.Rules != nil {
		p.Rules = make(map[string][]network.Rule, len(n.Rules))
		for d, rules := range n.Rules {
			for _, r := range rules {
				var nr network.Rule
				if r.Transform != nil {
					nr.Transform = &network.Transform{Headers: r.Transform.Headers}
				}
				p.Rules[d] = append(p.Rules[d], nr)
			}
		}
	}
	return &p
}

// checkNetwork validates a create's policy and that this server can give
// sandboxes a network at all.
func (n *networks) checkNetwork(p *network.Policy) error {
	if p == nil {
		return nil
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("network: %w", err)
	}
	return n.host.NetworkAvailable()
}

// NetworkAvailable reports whether sandboxes can be given a network here
// (nil), or why not.
func (n *networks) NetworkAvailable() error {
	return n.host.NetworkAvailable()
}

// UpdateNetwork replaces a team's sandbox's egress policy while it runs (or
// is paused): new connections follow the new policy at once and existing
// ones it denies are cut. A sandbox created without a network has none to
// change.
func (n *networks) UpdateNetwork(ctx context.Context, team, id string, p network.Policy) (store.Sandbox, error) {
	if err := p.Validate(); err != nil {
		return store.Sandbox{}, fmt.Errorf("network: %w", err)
	}
	unlock := n.lockSandbox(id)
	defer unlock()
	rec, err := n.Get(ctx, team, id)
	if err != nil {
		return store.Sandbox{}, err
	}
	if rec.Network == nil {
		return store.Sandbox{}, fmt.Errorf("sandbox %s was created without a network (loopback only), so it has no egress policy to change; "+
			"create it with allowInternetAccess or a network allowOut/denyOut policy (warren sandbox create --internet or --allow-out): %w", id, errdefs.ErrConflict)
	}
	if rec.State != StateRunning && rec.State != StatePaused {
		return store.Sandbox{}, fmt.Errorf("sandbox %s is %s; only a running or paused sandbox's network can change: %w", id, rec.State, errdefs.ErrConflict)
	}
	if err := n.host.UpdateNetwork(ctx, id, p); err != nil {
		return store.Sandbox{}, err
	}
	bg := context.WithoutCancel(ctx)
	if err := n.store.SetSandboxNetwork(bg, id, storedPolicy(&p)); err != nil {
		return store.Sandbox{}, err
	}
	n.event(ctx, rec, "network-updated", rec.State, rec.State, CauseAPI, describePolicy(p))
	return n.store.GetSandbox(bg, id)
}

// NetworkEvents returns a team's sandbox's egress audit after event id
// after, oldest first.
func (n *networks) NetworkEvents(ctx context.Context, team, id string, after int64, limit int) ([]store.NetworkEvent, error) {
	if _, err := n.Get(ctx, team, id); err != nil {
		return nil, err
	}
	return n.store.ListNetworkEvents(ctx, id, after, limit)
}

// adoptNetwork takes a recovered sandbox's network over from the daemon
// that set it up. On failure the sandbox keeps running: the kernel's rules
// of its last policy still hold it (a failed adoption can only close, never
// open), but its lookups go unanswered until it is recreated.
func (n *networks) adoptNetwork(ctx context.Context, rec store.Sandbox) {
	p := policyOf(rec)
	if p == nil {
		return
	}
	if err := n.host.AdoptNetwork(ctx, rec.ID, *p); err != nil {
		n.log.Error("sandbox's network could not be taken over after the restart; its last rules still hold, lookups fail", "sandbox", rec.ID, "err", err)
	}
}

// describePolicy is a policy in a line of the sandbox's history.
func describePolicy(p network.Policy) string {
	var b strings.Builder
	if p.AllowInternetAccess {
		b.WriteString("internet access")
	} else {
		b.WriteString("no internet access")
	}
	list := func(name string, l []string) {
		if len(l) == 0 {
			return
		}
		const show = 8
		fmt.Fprintf(&b, "; %s %s", name, strings.Join(l[:min(len(l), show)], ", "))
		if len(l) > show {
			fmt.Fprintf(&b, " and %d more", len(l)-show)
		}
	}
	list("allow", p.AllowOut)
	list("deny", p.DenyOut)
	if len(p.Rules) > 0 {
		var domains []string
		for d := range p.Rules {
			domains = append(domains, d)
		}
		sort.Strings(domains)
		list("rules for", domains)
	}
	if p.EgressProxy != nil {
		b.WriteString("; through the SOCKS5 proxy " + p.EgressProxy.Address)
	}
	return b.String()
}
