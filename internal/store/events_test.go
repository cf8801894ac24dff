package store

import (
	"context"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
)

func TestEvents(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	for i, k := range []string{"created", "paused", "resumed"} {
		e := Event{SandboxID: "sb1", Team: "a", Kind: k, From: "running", To: "paused", Cause: "api", Detail: strings.Repeat("x", 3000*i)}
		if err := s.AddEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddEvent(ctx, Event{SandboxID: "other", Kind: "created", Cause: "api"}); err != nil {
		t.Fatal(err)
	}
	evs, err := s.ListEvents(ctx, "sb1", 0, 0)
	if err != nil || len(evs) != 3 || evs[0].Kind != "created" || evs[2].Kind != "resumed" || len(evs[2].Detail) != maxEventDetail {
		t.Fatalf("%+v %v", evs, err)
	}
	more, _ := s.ListEvents(ctx, "sb1", evs[0].ID, 1)
	if len(more) != 1 || more[0].Kind != "paused" {
		t.Fatalf("after: %+v", more)
	}
	if err := s.AddEvent(ctx, Event{SandboxID: "BAD/ID", Kind: "x", Cause: "api"}); !errdefs.IsInvalid(err) {
		t.Fatalf("bad id: %v", err)
	}
	if err := s.AddEvent(ctx, Event{SandboxID: "sb1"}); !errdefs.IsInvalid(err) {
		t.Fatalf("no kind: %v", err)
	}
}

func TestAutoPauseResumeRoundTrip(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	sb := testSandbox("auto1")
	sb.AutoPause, sb.AutoResume = true, true
	if err := s.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSandbox(ctx, "auto1")
	if err != nil || !got.AutoPause || !got.AutoResume {
		t.Fatalf("%+v %v", got, err)
	}
}

func TestSetSandboxLimits(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	sb := testSandbox("lim1")
	if err := s.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSandboxLimits(ctx, "lim1", 1<<30, 0, 77); err != nil {
		t.Fatal(err)
	}
	got, _ := s.GetSandbox(ctx, "lim1")
	if got.MemoryBytes != 1<<30 || got.CPUMillis != sb.CPUMillis || got.Pids != 77 {
		t.Fatalf("%+v", got)
	}
	if err := s.SetSandboxLimits(ctx, "nosuch", 1, 1, 1); !errdefs.IsNotFound(err) {
		t.Fatalf("unknown: %v", err)
	}
}

func TestLastEvent(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	if _, err := s.LastEvent(ctx, "sb1"); !errdefs.IsNotFound(err) {
		t.Errorf("no events: %v, want ErrNotFound", err)
	}
	if _, err := s.LastEvent(ctx, "../x"); !errdefs.IsInvalid(err) {
		t.Errorf("bad id: %v, want ErrInvalid", err)
	}
	for _, kind := range []string{"created", "timed-out", "destroyed"} {
		if err := s.AddEvent(ctx, Event{SandboxID: "sb1", Team: "t", Kind: kind, From: "running", To: "destroyed", Cause: "timeout"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddEvent(ctx, Event{SandboxID: "sb2", Team: "t", Kind: "created", Cause: "api"}); err != nil {
		t.Fatal(err)
	}
	e, err := s.LastEvent(ctx, "sb1")
	if err != nil || e.Kind != "destroyed" || e.To != "destroyed" || e.Cause != "timeout" || e.Team != "t" || e.At.IsZero() {
		t.Errorf("last event = %+v, %v; want sb1's destroyed", e, err)
	}
}
