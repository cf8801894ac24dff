package store

import (
	"context"
	"errors"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
)

func fleetKey(t *testing.T, id, team string) (FleetKey, string) {
	t.Helper()
	plain, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return FleetKey{ID: id, Team: team, Name: "from a Secret", Prefix: plain[:displayLen], Hash: HashKey(plain)}, plain
}

// Fleet keys authenticate once synced, are revoked when they leave the
// set, come back when they return, and never touch keys made locally.
func TestSyncFleetKeys(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	local, _, err := s.CreateAPIKey(ctx, "admin", "local")
	if err != nil {
		t.Fatal(err)
	}
	a, aPlain := fleetKey(t, "keya", "t1")
	b, bPlain := fleetKey(t, "keyb", "t2")
	if skipped, err := s.SyncFleetKeys(ctx, []FleetKey{a, b}); err != nil || skipped != nil {
		t.Fatal(skipped, err)
	}
	if k, err := s.AuthenticateKey(ctx, aPlain); err != nil || k.Team != "t1" || k.ID != "keya" {
		t.Fatalf("fleet key a: %+v %v", k, err)
	}
	// b leaves; a's team changes.
	a.Team = "t3"
	if _, err := s.SyncFleetKeys(ctx, []FleetKey{a}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AuthenticateKey(ctx, bPlain); !errors.Is(err, errdefs.ErrUnauthenticated) {
		t.Fatalf("fleet key b after its Secret went: %v", err)
	}
	if k, err := s.AuthenticateKey(ctx, aPlain); err != nil || k.Team != "t3" {
		t.Fatalf("fleet key a after its team changed: %+v %v", k, err)
	}
	if _, err := s.AuthenticateKey(ctx, local); err != nil {
		t.Fatalf("local key after a sync: %v", err)
	}
	if skipped, err := s.SyncFleetKeys(ctx, []FleetKey{a, b}); err != nil || skipped != nil {
		t.Fatal(skipped, err)
	}
	if _, err := s.AuthenticateKey(ctx, bPlain); err != nil {
		t.Fatalf("fleet key b back: %v", err)
	}
}

// A malformed key or one clashing with a local key is reported and
// skipped; the others are synced.
func TestSyncFleetKeysSkipsBadOnes(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	_, local, err := s.CreateAPIKey(ctx, "admin", "local")
	if err != nil {
		t.Fatal(err)
	}
	good, goodPlain := fleetKey(t, "good", "t1")
	clash, _ := fleetKey(t, local.ID, "t1")
	bad, _ := fleetKey(t, "bad", "t1")
	bad.Hash = "nothex"
	skipped, err := s.SyncFleetKeys(ctx, []FleetKey{clash, bad, good})
	if err != nil || len(skipped) != 2 || !errdefs.IsAlreadyExists(skipped[0]) || !errdefs.IsInvalid(skipped[1]) {
		t.Fatalf("sync with a clash and a malformed key: %v %v", skipped, err)
	}
	if _, err := s.AuthenticateKey(ctx, goodPlain); err != nil {
		t.Fatalf("the good key: %v", err)
	}
	keys, err := s.ListAPIKeys(ctx, "")
	if err != nil || len(keys) != 2 || keys[0].Team != "admin" {
		t.Fatalf("keys: %+v %v", keys, err)
	}
}
