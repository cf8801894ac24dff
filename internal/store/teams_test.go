package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

func TestTeamLimits(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	if l, err := s.GetTeamLimits(ctx, "acme"); err != nil || l != (TeamLimits{Team: "acme"}) {
		t.Fatalf("limits of a team without any: %+v, %v; want none", l, err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	want := TeamLimits{Team: "acme", Sandboxes: 3, MemoryBytes: 2 << 30, CPUMillis: 4000, DiskBytes: 10 << 30, UpdatedAt: at}
	if err := s.SetTeamLimits(ctx, want); err != nil {
		t.Fatal(err)
	}
	want.Sandboxes = 5 // a second set replaces the first
	if err := s.SetTeamLimits(ctx, want); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetTeamLimits(ctx, "acme"); err != nil || !got.UpdatedAt.Equal(at) || got.Sandboxes != 5 || got.DiskBytes != want.DiskBytes {
		t.Errorf("GetTeamLimits = %+v, %v; want %+v", got, err, want)
	}
	for _, bad := range []TeamLimits{{Team: "acme", Sandboxes: -1}, {Team: "acme", DiskBytes: -5}, {Team: "../x"}, {Team: ""}} {
		if err := s.SetTeamLimits(ctx, bad); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("SetTeamLimits(%+v): %v, want ErrInvalid", bad, err)
		}
	}
}

func TestTeamUsage(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	now := time.Now()
	for _, sb := range []Sandbox{
		{ID: "a", State: StateRunning, MemoryBytes: 512 << 20, CPUMillis: 1000, QuotaBytes: 1 << 30},
		{ID: "b", State: StatePaused, MemoryBytes: 256 << 20, CPUMillis: 500, QuotaBytes: 2 << 30},
		{ID: "c", State: StateHibernated, MemoryBytes: 1 << 30, CPUMillis: 2000, QuotaBytes: 4 << 30}, // disk only
		{ID: "d", State: StateDestroyed, MemoryBytes: 1 << 30, CPUMillis: 2000, QuotaBytes: 8 << 30},  // nothing
		{ID: "e", State: StateCreating, MemoryBytes: 128 << 20, CPUMillis: 250},                       // no quota
	} {
		sb.Team, sb.Template, sb.Runtime, sb.CreatedAt = "acme", "base", "native", now
		if err := s.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	other := Sandbox{ID: "x", Team: "other", Template: "base", Runtime: "native", State: StateRunning, MemoryBytes: 1 << 30, QuotaBytes: 1 << 30, CreatedAt: now}
	if err := s.CreateSandbox(ctx, other); err != nil {
		t.Fatal(err)
	}
	u, err := s.GetTeamUsage(ctx, "acme")
	want := TeamUsage{Sandboxes: 3, MemoryBytes: 896 << 20, CPUMillis: 1750, DiskBytes: 7 << 30, Unquotaed: 1}
	if err != nil || u != want {
		t.Errorf("GetTeamUsage = %+v, %v; want %+v", u, err, want)
	}
	if u, err := s.GetTeamUsage(ctx, "nobody"); err != nil || u != (TeamUsage{}) {
		t.Errorf("usage of a team without sandboxes: %+v, %v", u, err)
	}
}
