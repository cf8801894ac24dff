package network

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
)

func TestPolicyValidation(t *testing.T) {
	good := []Policy{
		{},
		{AllowInternetAccess: true},
		{AllowOut: []string{"198.51.100.7", "198.51.100.0/24", "api.example.com", "*.example.com", "Example.COM.", "_srv.example.com"}},
		{DenyOut: []string{"0.0.0.0/0", "::/0", "2001:db8::1", "bad.example"}},
		{AllowOut: []string{" 198.51.100.7 "}},
	}
	for _, p := range good {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
	bad := []struct {
		p    Policy
		want string
	}{
		{Policy{AllowOut: []string{""}}, `allowOut[0] "": empty entry`},
		{Policy{AllowOut: []string{"198.51.100.0/33"}}, "not a CIDR block"},
		{Policy{AllowOut: []string{"2001:db8::/32"}}, "IPv6 destinations are not supported"},
		{Policy{AllowOut: []string{"*"}}, "bare wildcard"},
		{Policy{AllowOut: []string{"*.*.example.com"}}, "wildcard is allowed only as the whole first label"},
		{Policy{AllowOut: []string{"foo*.example.com"}}, "wildcard is allowed only"},
		{Policy{DenyOut: []string{"ex ample.com"}}, `denyOut[0] "ex ample.com": not an address, CIDR block or domain name`},
		{Policy{AllowOut: []string{"a..b"}}, "empty or over-long label"},
		{Policy{AllowOut: []string{strings.Repeat("a", 64) + ".com"}}, "over-long label"},
		{Policy{AllowOut: []string{"fe80::1%eth0"}}, "zone"},
		{Policy{AllowOut: make([]string, maxEntries+1)}, "at most 1024"},
	}
	for _, c := range bad {
		err := c.p.Validate()
		if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an ErrInvalid saying %q", c.p, err, c.want)
		}
	}
}

func TestPolicyCompile(t *testing.T) {
	c, err := compile(Policy{
		AllowInternetAccess: true,
		AllowOut:            []string{"198.51.100.0/25", "198.51.100.128/25", "198.51.100.7", "allowed.example", "*.wild.example"},
		DenyOut:             []string{"0.0.0.0/0", "203.0.113.5", "denied.example", "*.wild.example"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.defaultAllow {
		t.Errorf("denyOut 0.0.0.0/0 must make the default deny")
	}
	if len(c.allow) != 1 || c.allow[0] != spanOf(netip.MustParsePrefix("198.51.100.0/24")) {
		t.Errorf("allow spans not merged: %v", c.allow)
	}
	if c.deny.all() || !c.deny.contains(netip.MustParseAddr("203.0.113.5")) {
		t.Errorf("deny spans: %v", c.deny)
	}
	for _, tc := range []struct {
		q      string
		ok     bool
		reason string
	}{
		{"allowed.example", true, ReasonDomain},
		{"sub.allowed.example", false, ReasonDefault},
		{"denied.example", false, ReasonPolicy},
		{"x.wild.example", false, ReasonPolicy}, // deny wins
		{"other.example", false, ReasonDefault},
	} {
		ok, reason := c.nameVerdict(tc.q)
		if ok != tc.ok || reason != tc.reason {
			t.Errorf("%s: %v %s, want %v %s", tc.q, ok, reason, tc.ok, tc.reason)
		}
	}
	open, _ := compile(Policy{AllowInternetAccess: true})
	if ok, reason := open.nameVerdict("anything.example"); !ok || reason != ReasonDefault {
		t.Errorf("default-allow: %v %s", ok, reason)
	}
}

func TestSpans(t *testing.T) {
	p := netip.MustParsePrefix
	s := spansOf(p("10.0.0.0/8"), p("10.1.0.0/16"), p("11.0.0.0/8"), p("192.168.0.0/16"))
	if len(s) != 2 || addrOf(s[0].lo) != netip.MustParseAddr("10.0.0.0") || addrOf(s[0].hi) != netip.MustParseAddr("11.255.255.255") {
		t.Fatalf("merge: %v", s)
	}
	r := s.minus(spansOf(p("10.5.0.0/16")))
	for addr, want := range map[string]bool{"10.4.255.255": true, "10.5.0.0": false, "10.5.255.255": false, "10.6.0.0": true, "192.168.1.1": true, "12.0.0.0": false} {
		if got := r.contains(netip.MustParseAddr(addr)); got != want {
			t.Errorf("contains(%s) = %v", addr, got)
		}
	}
	all := spansOf(p("0.0.0.0/0"))
	if !all.all() || !all.contains(netip.MustParseAddr("255.255.255.255")) {
		t.Errorf("0.0.0.0/0: %v", all)
	}
	if got := all.minus(spansOf(p("0.0.0.0/1"))); len(got) != 1 || addrOf(got[0].lo) != netip.MustParseAddr("128.0.0.0") || got[0].hi != ^uint32(0) {
		t.Errorf("upper half: %v", got)
	}
	els := intervalElements(spansOf(p("128.0.0.0/1"), p("10.0.0.0/8")))
	if len(els) != 3 || !els[1].IntervalEnd || els[2].IntervalEnd {
		t.Errorf("interval elements (no end past the top): %+v", els)
	}
}

func TestNames(t *testing.T) {
	id := strings.Repeat("a1", 31)
	v := vethName(DefaultVethPrefix, id)
	if len(v) > 15 || !strings.HasPrefix(v, DefaultVethPrefix) || v == vethName(DefaultVethPrefix, "other") {
		t.Errorf("veth name %q", v)
	}
	for _, p := range []string{"w", "wr", "wrn", "wb1"} {
		if err := CheckVethPrefix(p); err != nil || len(vethName(p, id)) > 15 {
			t.Errorf("veth prefix %q: %v, name %q", p, err, vethName(p, id))
		}
	}
	for _, p := range []string{"", "wrnx", "w-1", "w/", "w b"} {
		if CheckVethPrefix(p) == nil {
			t.Errorf("veth prefix %q accepted", p)
		}
	}
	h := &hostNet{vethPrefix: "wr"}
	if h.isOurVeth(vethName("wrn", id)) || !h.isOurVeth(vethName("wr", id)) {
		t.Errorf("prefix wr claims %q or not %q", vethName("wrn", id), vethName("wr", id))
	}
	for _, name := range []string{"warren", "warren-b", "w_2"} {
		if err := CheckTableName(name); err != nil {
			t.Errorf("table %q: %v", name, err)
		}
	}
	for _, name := range []string{"", "a b", "x;y", strings.Repeat("t", 33)} {
		if CheckTableName(name) == nil {
			t.Errorf("table %q accepted", name)
		}
	}
	gid, addr, ok := parseAlias(vethAlias(id, netip.MustParseAddr("10.87.0.9")))
	if !ok || gid != id || addr != netip.MustParseAddr("10.87.0.9") {
		t.Errorf("alias round trip: %s %s %v", gid, addr, ok)
	}
	if _, _, ok := parseAlias("something else"); ok {
		t.Errorf("foreign alias parsed")
	}
}

func TestParsePacket(t *testing.T) {
	// IPv4 + TCP SYN to 198.51.100.10:443.
	pkt := []byte{0x45, 0, 0, 60, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 87, 0, 2, 198, 51, 100, 10,
		0xc0, 0x00, 0x01, 0xbb}
	var r logRecord
	if !parsePacket(pkt, &r) || r.proto != "tcp" || r.port != 443 ||
		r.src != netip.MustParseAddr("10.87.0.2") || r.dst != netip.MustParseAddr("198.51.100.10") {
		t.Fatalf("parsed %+v", r)
	}
	pkt[9] = 1 // ICMP: no port
	r = logRecord{}
	if !parsePacket(pkt, &r) || r.proto != "icmp" || r.port != 0 {
		t.Fatalf("parsed %+v", r)
	}
	if parsePacket([]byte{0x45, 0}, &r) || parsePacket(nil, &r) {
		t.Fatalf("short packets parsed")
	}
}

func TestEventRing(t *testing.T) {
	ev := &events{capacity: 3, rings: map[string]*eventRing{}}
	for range 5 {
		ev.record(Event{SandboxID: "a"})
	}
	got := ev.list("a", 0, 10)
	if len(got) != 3 || got[0].Seq != 3 || got[2].Seq != 5 {
		t.Fatalf("ring: %+v", got)
	}
	if got := ev.list("a", 4, 10); len(got) != 1 || got[0].Seq != 5 {
		t.Fatalf("after 4: %+v", got)
	}
	if got := ev.list("a", 0, 2); len(got) != 2 || got[1].Seq != 4 {
		t.Fatalf("limit: %+v", got)
	}
}
