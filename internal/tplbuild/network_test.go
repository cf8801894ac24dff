package tplbuild

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/network"
)

// netOnly is a Sandboxes whose only answer is NetworkAvailable's.
type netOnly struct {
	Sandboxes
	err error
}

func (n netOnly) NetworkAvailable() error { return n.err }

func TestBuildNetwork(t *testing.T) {
	spec := func(body string) Spec {
		var s Spec
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	on := &Service{cfg: Config{Sandboxes: netOnly{}, DefaultInternet: true}}
	off := &Service{cfg: Config{Sandboxes: netOnly{err: fmt.Errorf("no network here: %w", errdefs.ErrUnsupported)}, DefaultInternet: true}}
	cases := []struct {
		body string
		want string // describeNetwork of the policy on a server with networks
		off  string // and on one without ("error": the build is refused)
	}{
		{`{"steps":[]}`, "internet", "none (loopback only)"},
		{`{"steps":[],"allowInternetAccess":true}`, "internet", "error"},
		{`{"steps":[],"allowInternetAccess":false}`, "none (loopback only)", "none (loopback only)"},
		{`{"steps":[],"network":{"allowOut":["198.51.100.7"],"denyOut":["0.0.0.0/0"]}}`, "internet; allow 198.51.100.7; deny 0.0.0.0/0", "error"},
		{`{"steps":[],"allowInternetAccess":false,"network":{"allowOut":["example.com"]}}`, "no internet; allow example.com", "error"},
	}
	for _, c := range cases {
		s := spec(c.body)
		if err := s.Validate(); err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		p, err := buildNetwork(on.cfg, s)
		if err != nil || describeNetwork(p) != c.want {
			t.Errorf("%s: %q, %v; want %q", c.body, describeNetwork(p), err, c.want)
		}
		p, err = buildNetwork(off.cfg, s)
		if got := describeNetwork(p); err != nil {
			got = "error"
			if !errors.Is(err, errdefs.ErrUnsupported) {
				t.Errorf("%s without networks: %v", c.body, err)
			}
		} else if got != c.off {
			t.Errorf("%s without networks: %q; want %q", c.body, got, c.off)
		}
	}
	for _, body := range []string{
		`{"steps":[],"network":{"allowOut":["not a/cidr"]}}`,
		`{"steps":[],"network":{"denyOut":["::1/200"]}}`,
	} {
		if err := spec(body).Validate(); !errdefs.IsInvalid(err) {
			t.Errorf("%s: %v; want invalid", body, err)
		}
	}
	// Without --template-build-internet a build that asks for nothing has
	// loopback only; one that asks for the internet gets it.
	plain := &Service{cfg: Config{Sandboxes: netOnly{}}}
	if p, err := buildNetwork(plain.cfg, spec(`{"steps":[]}`)); p != nil || err != nil {
		t.Errorf("the default without --template-build-internet: %+v, %v", p, err)
	}
	if p, err := buildNetwork(plain.cfg, spec(`{"steps":[],"allowInternetAccess":true}`)); describeNetwork(p) != "internet" || err != nil {
		t.Errorf("allowInternetAccess without --template-build-internet: %+v, %v", p, err)
	}
	p, _ := spec(`{"steps":[],"network":{"allowOut":["198.51.100.7"]}}`).policy(true)
	if want := (network.Policy{AllowInternetAccess: true, AllowOut: []string{"198.51.100.7"}}); !p.AllowInternetAccess || !slices.Equal(p.AllowOut, want.AllowOut) {
		t.Errorf("policy: %+v", p)
	}
}

func TestNetworkKey(t *testing.T) {
	keys := map[string]bool{}
	for _, p := range []*network.Policy{nil, {AllowInternetAccess: true}, {AllowInternetAccess: true, DenyOut: []string{"0.0.0.0/0"}, AllowOut: []string{"198.51.100.7"}}} {
		keys[stepKey(networkKey("template:base:1", p), Step{Type: "RUN", Args: []string{"apt-get update"}})] = true
	}
	if len(keys) != 3 {
		t.Fatalf("builds with different networks share a step's cache key: %v", keys)
	}
	a, b := &network.Policy{AllowInternetAccess: true}, &network.Policy{AllowInternetAccess: true}
	if networkKey("k", a) != networkKey("k", b) {
		t.Fatal("the same network gives different keys")
	}
}
