package tplbuild

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/warrenhq/warren/internal/network"
)

// Network is warren's extension of a build's body (and of the template
// JSON `warren template build --file` reads): the build sandbox's egress
// lists, as a sandbox create's network field carries them.
type Network struct {
	AllowOut []string `json:"allowOut,omitempty"`
	DenyOut  []string `json:"denyOut,omitempty"`
}

// Build network decisions. A build whose request says nothing about the
// network gets what a create that asks for nothing gets: loopback only.
// E2B's builds have the internet, and the SDK has no field to ask for it,
// so a server started with --template-build-internet gives such builds
// what a create with allowInternetAccess gets instead: the internet,
// without the ranges every sandbox is denied (private ranges, the host,
// other sandboxes). A request's allowInternetAccess and network.allowOut/
// denyOut set it as on a create ({allowOut: [x], denyOut: ["0.0.0.0/0"]}:
// only x; allowInternetAccess false with no lists: loopback only; lists
// alone keep the default's internet access). On a server that gives
// sandboxes no network a build that asked for nothing runs with loopback
// only; one that asked for a network is refused at its request.

// policy is the build sandbox's egress policy (nil: loopback only) given
// the server's default, and whether the spec asked for a network itself.
func (s Spec) policy(defaultInternet bool) (p *network.Policy, explicit bool) {
	internet := defaultInternet
	if s.AllowInternetAccess != nil {
		internet = *s.AllowInternetAccess
	}
	var allow, deny []string
	if s.Network != nil {
		allow, deny = s.Network.AllowOut, s.Network.DenyOut
	}
	explicit = s.AllowInternetAccess != nil || s.Network != nil
	if !internet && allow == nil && deny == nil {
		return nil, explicit
	}
	return &network.Policy{AllowInternetAccess: internet, AllowOut: allow, DenyOut: deny}, explicit
}

// validateNetwork checks the spec's network fields.
func (s Spec) validateNetwork() error {
	p, _ := s.policy(true)
	if p == nil {
		return nil
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("network: %w", err)
	}
	return nil
}

// buildNetwork is the policy a build's sandbox gets here: the spec's, or
// none when the spec asked for nothing and this server gives sandboxes no
// network. An explicit network this server cannot give is an error.
func buildNetwork(cfg Config, spec Spec) (*network.Policy, error) {
	p, explicit := spec.policy(cfg.DefaultInternet)
	if p == nil {
		return nil, nil
	}
	if err := cfg.Sandboxes.NetworkAvailable(); err != nil {
		if explicit {
			return nil, fmt.Errorf("the build asks for a network: %w", err)
		}
		return nil, nil
	}
	return p, nil
}

// networkKey adds a build's network to its cache keys: a step cached by a
// build with the internet (that may have fetched something) is not reused
// by a build denied it, nor the other way round.
func networkKey(parent string, p *network.Policy) string {
	if p == nil {
		return parent + "\x00network:none"
	}
	b, _ := json.Marshal(network.Policy{AllowInternetAccess: p.AllowInternetAccess, AllowOut: p.AllowOut, DenyOut: p.DenyOut})
	return parent + "\x00network:" + string(b)
}

// describeNetwork says in a build's log (and its record) what network its
// sandbox has.
func describeNetwork(p *network.Policy) string {
	if p == nil {
		return "none (loopback only)"
	}
	var parts []string
	if p.AllowInternetAccess {
		parts = append(parts, "internet")
	} else {
		parts = append(parts, "no internet")
	}
	if len(p.AllowOut) > 0 {
		parts = append(parts, "allow "+strings.Join(p.AllowOut, ","))
	}
	if len(p.DenyOut) > 0 {
		parts = append(parts, "deny "+strings.Join(p.DenyOut, ","))
	}
	return strings.Join(parts, "; ")
}
