package server

import (
	"fmt"
	"net/http"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/network"
	"github.com/warrenhq/warren/internal/store"
)

// networkRoutes serve a sandbox's egress policy and its audit.
type networkRoutes struct {
	networks Networks
}

// createPolicy reads a create's egress policy: allow_internet_access true
// or a network allowOut/denyOut list gives the sandbox a network; neither
// leaves it with loopback only (E2B's SDK sends the fields only when its
// caller set them).
func createPolicy(body client.NewSandbox) *network.Policy {
	internet := body.AllowInternetAccess != nil && *body.AllowInternetAccess
	var allow, deny []string
	var rules map[string][]client.NetworkRule
	var ep *client.EgressProxy
	if n := body.Network; n != nil {
		allow, deny, rules, ep = n.AllowOut, n.DenyOut, n.Rules, n.EgressProxy
	}
	if !internet && allow == nil && deny == nil && rules == nil && ep == nil {
		return nil
	}
	return &network.Policy{AllowInternetAccess: internet, AllowOut: allow, DenyOut: deny, Rules: rulesIn(rules), EgressProxy: egressProxyIn(ep)}
}

func egressProxyIn(e *client.EgressProxy) *network.EgressProxy {
	if e == nil {
		return nil
	}
	return &network.EgressProxy{Address: e.Address, Username: e.Username, Password: e.Password}
}

// egressProxyOut is what answers show of a SOCKS5 upstream: never its
// password.
func egressProxyOut(e *store.NetworkEgressProxy) *client.EgressProxy {
	if e == nil {
		return nil
	}
	return &client.EgressProxy{Address: e.Address, Username: e.Username}
}

// rulesIn and rulesOut convert network rules between the API's shape and
// the network package's.
func rulesIn(in map[string][]client.NetworkRule) map[string][]network.Rule {
	if in == nil {
		return nil
	}
	out := make(map[string][]network.Rule, len(in))
	for d, rules := range in {
		list := make([]network.Rule, 0, len(rules))
		for _, r := range rules {
			var nr network.Rule
			if r.Transform != nil {
				nr.Transform = &network.Transform{Headers: r.Transform.Headers}
			}
			list = append(list, nr)
		}
		out[d] = list
	}
	return out
}

func rulesOut(in map[string][]store.NetworkRule) map[string][]client.NetworkRule {
	if in == nil {
		return nil
	}
	out := make(map[string][]client.NetworkRule, len(in))
	for d, rules := range in {
		list := make([]client.NetworkRule, 0, len(rules))
		for _, r := range rules {
			var cr client.NetworkRule
			if r.Transform != nil {
				cr.Transform = &client.NetworkTransform{Headers: r.Transform.Headers}
			}
			list = append(list, cr)
		}
		out[d] = list
	}
	return out
}

// describeNetwork fills a sandbox's answer with its egress policy.
func describeNetwork(d *client.SandboxDetail, rec store.Sandbox) {
	public := rec.PublicPorts
	if rec.MaskRequestHost != "" {
		d.Network = &client.Network{AllowPublicTraffic: &public, MaskRequestHost: rec.MaskRequestHost}
	}
	if rec.Network == nil {
		return
	}
	internet := rec.Network.AllowInternetAccess
	d.AllowInternetAccess = &internet
	d.Network = &client.Network{AllowPublicTraffic: &public, AllowOut: rec.Network.AllowOut, DenyOut: rec.Network.DenyOut, MaskRequestHost: rec.MaskRequestHost,
		Rules: rulesOut(rec.Network.Rules), EgressProxy: egressProxyOut(rec.Network.EgressProxy)}
}

// networkUpdate is the body of PUT /sandboxes/{id}/network. E2B's SDK names
// the default allow_internet_access; warren's client allowInternetAccess.
type networkUpdate struct {
	AllowOut               []string                        `json:"allowOut"`
	DenyOut                []string                        `json:"denyOut"`
	AllowInternetAccess    *bool                           `json:"allowInternetAccess"`
	AllowInternetAccessE2B *bool                           `json:"allow_internet_access"`
	Rules                  map[string][]client.NetworkRule `json:"rules"`
	EgressProxy            *client.EgressProxy             `json:"egressProxy"`
}

// updateNetwork serves PUT /sandboxes/{id}/network: the lists replace the
// sandbox's; an absent allowInternetAccess keeps its current default.
func (s *networkRoutes) updateNetwork(w http.ResponseWriter, r *http.Request) {
	var body networkUpdate
	if err := decodeJSON(w, r, &body); err != nil {
		writeError(w, r, err)
		return
	}
	team, id := teamOf(r), r.PathValue("id")
	internet := body.AllowInternetAccess
	if internet == nil {
		internet = body.AllowInternetAccessE2B
	}
	p := network.Policy{AllowOut: body.AllowOut, DenyOut: body.DenyOut, Rules: rulesIn(body.Rules), EgressProxy: egressProxyIn(body.EgressProxy)}
	if internet != nil {
		p.AllowInternetAccess = *internet
	} else {
		rec, err := s.networks.Get(r.Context(), team, id)
		if err != nil {
			writeError(w, r, err)
			return
		}
		if rec.Network != nil {
			p.AllowInternetAccess = rec.Network.AllowInternetAccess
		}
	}
	if _, err := s.networks.UpdateNetwork(r.Context(), team, id, p); err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// getNetwork serves GET /sandboxes/{id}/network: the policy in force.
func (s *networkRoutes) getNetwork(w http.ResponseWriter, r *http.Request) {
	rec, err := s.networks.Get(r.Context(), teamOf(r), r.PathValue("id"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	if rec.Network == nil {
		writeError(w, r, fmt.Errorf("sandbox %s was created without a network (loopback only): %w", rec.ID, errdefs.ErrConflict))
		return
	}
	internet := rec.Network.AllowInternetAccess
	out := client.NetworkPolicy{AllowInternetAccess: &internet, AllowOut: rec.Network.AllowOut, DenyOut: rec.Network.DenyOut,
		Rules: rulesOut(rec.Network.Rules), EgressProxy: egressProxyOut(rec.Network.EgressProxy)}
	if out.AllowOut == nil {
		out.AllowOut = []string{}
	}
	if out.DenyOut == nil {
		out.DenyOut = []string{}
	}
	writeJSON(w, http.StatusOK, out)
}

// networkEvents serves GET /sandboxes/{id}/network/events?after=&limit=:
// the egress audit, oldest first; `after` resumes from an event id.
func (s *networkRoutes) networkEvents(w http.ResponseWriter, r *http.Request) {
	after, err := afterParam(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	limit, err := pageLimit(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	evs, err := s.networks.NetworkEvents(r.Context(), teamOf(r), r.PathValue("id"), after, limit)
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := make([]client.NetworkEvent, 0, len(evs))
	for _, e := range evs {
		out = append(out, client.NetworkEvent{ID: e.ID, At: e.At, Verdict: e.Verdict, Reason: e.Reason, Protocol: e.Protocol,
			Destination: e.Destination, Port: e.Port, Domain: e.Domain})
	}
	writeJSON(w, http.StatusOK, out)
}
