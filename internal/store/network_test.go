package store

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

func TestNetworkPolicyRoundTrip(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	if err := s.CreateSandbox(ctx, testSandbox("plain")); err != nil {
		t.Fatal(err)
	}
	sb := testSandbox("netted")
	sb.Network = &NetworkPolicy{AllowOut: []string{"198.51.100.0/24", "api.example.com"}, DenyOut: []string{"0.0.0.0/0"}}
	if err := s.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSandbox(ctx, "plain")
	if err != nil || got.Network != nil {
		t.Fatalf("a sandbox without a policy reads back %+v, %v", got.Network, err)
	}
	got, err = s.GetSandbox(ctx, "netted")
	if err != nil || got.Network == nil || got.Network.AllowInternetAccess ||
		!slices.Equal(got.Network.AllowOut, sb.Network.AllowOut) || !slices.Equal(got.Network.DenyOut, sb.Network.DenyOut) {
		t.Fatalf("round trip: %+v, %v", got.Network, err)
	}
	if err := s.SetSandboxNetwork(ctx, "netted", &NetworkPolicy{AllowInternetAccess: true}); err != nil {
		t.Fatal(err)
	}
	got, _ = s.GetSandbox(ctx, "netted")
	if got.Network == nil || !got.Network.AllowInternetAccess || len(got.Network.AllowOut) != 0 {
		t.Fatalf("after update: %+v", got.Network)
	}
	if err := s.SetSandboxNetwork(ctx, "missing", &NetworkPolicy{}); !errdefs.IsNotFound(err) {
		t.Fatalf("update of a missing sandbox: %v", err)
	}
}

func TestNetworkEvents(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	for _, id := range []string{"sba", "sbb"} {
		if err := s.CreateSandbox(ctx, testSandbox(id)); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Unix(1700000000, 0)
	if err := s.AddNetworkEvents(ctx, []NetworkEvent{
		{SandboxID: "sba", At: at, Verdict: "allow", Reason: "policy", Protocol: "tcp", Destination: "198.51.100.10", Port: 80},
		{SandboxID: "sbb", At: at, Verdict: "deny", Reason: "reserved", Protocol: "tcp", Destination: "169.254.169.254", Port: 80},
		{SandboxID: "sba", At: at, Verdict: "deny", Reason: "policy", Protocol: "dns", Domain: "denied.example"},
		{SandboxID: "BAD/ID", Verdict: "deny"}, // skipped
	}); err != nil {
		t.Fatal(err)
	}
	evs, err := s.ListNetworkEvents(ctx, "sba", 0, 0)
	if err != nil || len(evs) != 2 {
		t.Fatalf("sba: %+v %v", evs, err)
	}
	if e := evs[0]; e.Verdict != "allow" || e.Destination != "198.51.100.10" || e.Port != 80 || !e.At.Equal(at) || e.Protocol != "tcp" {
		t.Fatalf("first: %+v", e)
	}
	if e := evs[1]; e.Domain != "denied.example" || e.Protocol != "dns" || e.ID <= evs[0].ID {
		t.Fatalf("second: %+v", e)
	}
	if page, _ := s.ListNetworkEvents(ctx, "sba", evs[0].ID, 5); len(page) != 1 || page[0].ID != evs[1].ID {
		t.Fatalf("after the first: %+v", page)
	}

	// Bounded: only the newest MaxNetworkEventsPerSandbox stay.
	batch := make([]NetworkEvent, 0, MaxNetworkEventsPerSandbox)
	for i := range MaxNetworkEventsPerSandbox {
		batch = append(batch, NetworkEvent{SandboxID: "sba", Verdict: "deny", Reason: "default", Protocol: "udp", Destination: fmt.Sprintf("198.51.100.%d", i%250), Port: i})
	}
	if err := s.AddNetworkEvents(ctx, batch); err != nil {
		t.Fatal(err)
	}
	all, _ := s.ListNetworkEvents(ctx, "sba", 0, 0)
	if len(all) != MaxNetworkEventsPerSandbox || all[0].Port != 0 || all[0].Protocol != "udp" {
		t.Fatalf("after overflow: %d events, first %+v", len(all), all[0])
	}
	if other, _ := s.ListNetworkEvents(ctx, "sbb", 0, 0); len(other) != 1 {
		t.Fatalf("another sandbox's events were pruned: %+v", other)
	}

	// They go with the sandbox's record.
	if err := s.DeleteSandbox(ctx, "sba"); err != nil {
		t.Fatal(err)
	}
	if left, _ := s.ListNetworkEvents(ctx, "sba", 0, 0); len(left) != 0 {
		t.Fatalf("%d events outlived their sandbox", len(left))
	}
	if err := s.AddNetworkEvents(ctx, []NetworkEvent{{SandboxID: "sba", Verdict: "deny"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteOrphanNetworkEvents(ctx); err != nil {
		t.Fatal(err)
	}
	if left, _ := s.ListNetworkEvents(ctx, "sba", 0, 0); len(left) != 0 {
		t.Fatalf("orphan events remain: %+v", left)
	}
	if other, _ := s.ListNetworkEvents(ctx, "sbb", 0, 0); len(other) != 1 {
		t.Fatalf("a live sandbox's events were dropped as orphans")
	}
}
