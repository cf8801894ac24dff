package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// NetworkService reads and changes a sandbox's egress policy, reads its
// audit, and connects to its ports (the API's network routes).
type NetworkService struct{ t *transport }

// NetworkPolicy is a sandbox's egress policy: the body of PUT
// /sandboxes/{id}/network and the answer of GET /sandboxes/{id}/network.
// AllowOut and DenyOut replace the sandbox's lists; AllowInternetAccess
// unset keeps the sandbox's current default. (E2B's SDK sends
// allow_internet_access, which is accepted too.)
type NetworkPolicy struct {
	AllowInternetAccess *bool    `json:"allowInternetAccess,omitempty"`
	AllowOut            []string `json:"allowOut"`
	DenyOut             []string `json:"denyOut"`
	// Rules replace the sandbox's network rules (nil: none).
	Rules map[string][]NetworkRule `json:"rules,omitempty"`
	// EgressProxy replaces the sandbox's SOCKS5 upstream (nil: none).
	EgressProxy *EgressProxy `json:"egressProxy,omitempty"`
}

// NetworkEvent is one outbound connection attempt of a sandbox, or one
// name it looked up (protocol "dns"), with the verdict of its policy.
type NetworkEvent struct {
	ID int64     `json:"id"`
	At time.Time `json:"at"`
	// Verdict is allow or deny.
	Verdict string `json:"verdict"`
	// Reason is what decided: policy (an allowOut/denyOut address, CIDR or,
	// for a lookup, name), domain (an address answered for an allowed
	// name), default (nothing matched), reserved (an always-denied range:
	// private, link-local, metadata) or host (the host itself).
	Reason      string `json:"reason"`
	Protocol    string `json:"protocol"`
	Destination string `json:"destination,omitempty"`
	Port        int    `json:"port,omitempty"`
	Domain      string `json:"domain,omitempty"`
}

// Policy returns a sandbox's egress policy (409 for a sandbox
// created without a network).
func (s *NetworkService) Policy(ctx context.Context, id string) (NetworkPolicy, error) {
	var p NetworkPolicy
	err := s.t.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "/network")}, &p)
	return p, err
}

// Update replaces a running sandbox's egress policy: new connections
// follow it at once and existing ones it denies are cut.
func (s *NetworkService) Update(ctx context.Context, id string, p NetworkPolicy) error {
	r, err := jsonBody(http.MethodPut, sandboxPath(id, "/network"), p)
	if err != nil {
		return err
	}
	return s.t.call(ctx, r, nil)
}

// Events returns a sandbox's egress audit after event id after (0 =
// the oldest kept), at most limit (0 = the server's page size).
func (s *NetworkService) Events(ctx context.Context, id string, after int64, limit int) ([]NetworkEvent, error) {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	p := sandboxPath(id, "/network/events")
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var out []NetworkEvent
	err := s.t.call(ctx, request{method: http.MethodGet, path: p}, &out)
	return out, err
}
