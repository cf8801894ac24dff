package network

import (
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
)

func headerRule(name, value string) []Rule {
	return []Rule{{Transform: &Transform{Headers: map[string]string{name: value}}}}
}

func TestRulesValidate(t *testing.T) {
	for name, rules := range map[string]map[string][]Rule{
		"bad header name":  {"api.example.com": headerRule("Bad Header", "v")},
		"header with CRLF": {"api.example.com": headerRule("X-A", "v\r\nX-Injected: 1")},
		"bare wildcard":    {"*": headerRule("X-A", "v")},
		"not a domain":     {"a b": headerRule("X-A", "v")},
	} {
		if err := (Policy{Rules: rules}).Validate(); !errdefs.IsInvalid(err) {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
	p := Policy{Rules: map[string][]Rule{
		"*.example.com":     headerRule("X-Rule", "wild"),
		"*.api.example.com": headerRule("X-Rule", "longer wild"),
		"api.example.com":   headerRule("X-Rule", "exact"),
	}}
	c, err := compile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !c.proxied() {
		t.Fatal("a policy with rules is not proxied")
	}
	for host, want := range map[string]string{
		"api.example.com":    "exact",
		"v1.api.example.com": "longer wild",
		"www.example.com":    "wild",
		"example.com":        "",
	} {
		rules, ok := c.rulesFor(host)
		got := ""
		if ok {
			got = rules[0].Transform.Headers["X-Rule"]
		}
		if got != want {
			t.Errorf("rules for %s: %q, want %q", host, got, want)
		}
	}
	if c, _ := compile(Policy{AllowInternetAccess: true}); c.proxied() {
		t.Error("a policy without rules is proxied")
	}
}

func TestEgressProxyValidate(t *testing.T) {
	for _, e := range []EgressProxy{{Address: "nope"}, {Address: ":1080"}, {Address: "h:0"}, {Address: "h:99999"},
		{Address: "h:1080", Password: "p"}, {Address: "h:1080", Username: string(make([]byte, 256))}} {
		if err := (Policy{EgressProxy: &e}).Validate(); !errdefs.IsInvalid(err) {
			t.Errorf("%+v: %v, want invalid", e, err)
		}
	}
	c, err := compile(Policy{EgressProxy: &EgressProxy{Address: "proxy.example:1080", Username: "u", Password: "p"}})
	if err != nil || !c.proxied() || !c.tunnelled() {
		t.Fatalf("a valid egressProxy: %v", err)
	}
}
