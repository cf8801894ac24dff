package store

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

var keyShape = regexp.MustCompile(`^e2b_[0-9a-f]{32}$`)

func TestNewKeyAndHash(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		k, err := NewKey()
		if err != nil {
			t.Fatal(err)
		}
		if !keyShape.MatchString(k) || !wellFormedKey(k) {
			t.Fatalf("NewKey = %q, not e2b_ + 32 lowercase hex", k)
		}
		if seen[k] {
			t.Fatalf("NewKey repeated %q", k)
		}
		seen[k] = true
	}
	// A known SHA-256 vector, so the stored hash never silently changes.
	if got := HashKey("abc"); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("HashKey(abc) = %s", got)
	}
}

func TestAPIKeys(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	if n, err := s.CountAPIKeys(ctx); err != nil || n != 0 {
		t.Fatalf("CountAPIKeys on a new store = %d, %v", n, err)
	}
	plain, k, err := s.CreateAPIKey(ctx, "acme", "laptop of Zoë")
	if err != nil {
		t.Fatalf("CreateAPIKey: %v", err)
	}
	if !keyShape.MatchString(plain) || k.Prefix != plain[:12] || k.ID == "" || strings.Contains(plain, k.ID) {
		t.Errorf("key %q record %+v", plain, k)
	}
	// Neither the key nor its secret part is stored anywhere.
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM api_keys
		WHERE instr(id || team || name || prefix || hash, ?) > 0`, plain[12:]).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows hold the key's secret part (%v)", n, err)
	}

	got, err := s.AuthenticateKey(ctx, plain)
	if err != nil {
		t.Fatalf("AuthenticateKey: %v", err)
	}
	if got.ID != k.ID || got.Team != "acme" || got.Name != "laptop of Zoë" || got.LastUsedAt.IsZero() {
		t.Errorf("AuthenticateKey = %+v", got)
	}
	used := got.LastUsedAt
	// A second use within the minute does not write LastUsedAt again.
	got, _ = s.AuthenticateKey(ctx, plain)
	if !got.LastUsedAt.Equal(used) {
		t.Errorf("LastUsedAt moved from %v to %v within a minute", used, got.LastUsedAt)
	}
	// Pretend the last use was two minutes ago: the next one records itself.
	if _, err := s.w.ExecContext(ctx, `UPDATE api_keys SET last_used_at = ?`, toNanos(used.Add(-2*time.Minute))); err != nil {
		t.Fatal(err)
	}
	got, _ = s.AuthenticateKey(ctx, plain)
	if !got.LastUsedAt.After(used.Add(-time.Second)) {
		t.Errorf("LastUsedAt = %v, not refreshed after two minutes", got.LastUsedAt)
	}
	list, _ := s.ListAPIKeys(ctx, "acme")
	if len(list) != 1 || !list[0].LastUsedAt.Equal(got.LastUsedAt) {
		t.Errorf("ListAPIKeys after use = %+v", list)
	}

	other, k2, err := s.CreateAPIKey(ctx, "other", "")
	if err != nil {
		t.Fatal(err)
	}
	for team, want := range map[string]int{"": 2, "acme": 1, "other": 1, "nobody": 0} {
		list, err := s.ListAPIKeys(ctx, team)
		if err != nil || len(list) != want {
			t.Errorf("ListAPIKeys(%q) = %d keys, %v; want %d", team, len(list), err, want)
		}
	}
	if n, _ := s.CountAPIKeys(ctx); n != 2 {
		t.Errorf("CountAPIKeys = %d, want 2", n)
	}

	if err := s.RevokeAPIKey(ctx, k2.ID); err != nil {
		t.Fatalf("RevokeAPIKey: %v", err)
	}
	if err := s.RevokeAPIKey(ctx, k2.ID); err != nil {
		t.Errorf("second RevokeAPIKey: %v", err)
	}
	if _, err := s.AuthenticateKey(ctx, other); !errors.Is(err, errdefs.ErrUnauthenticated) {
		t.Errorf("revoked key: %v, want ErrUnauthenticated", err)
	}
	if _, err := s.AuthenticateKey(ctx, plain); err != nil {
		t.Errorf("the other key stopped working: %v", err)
	}
	if n, _ := s.CountAPIKeys(ctx); n != 1 {
		t.Errorf("CountAPIKeys after revoke = %d, want 1", n)
	}
	if list, _ := s.ListAPIKeys(ctx, "other"); len(list) != 1 || !list[0].Revoked {
		t.Errorf("revoked key listed as %+v", list)
	}
	if err := s.RevokeAPIKey(ctx, "nope"); !errdefs.IsNotFound(err) {
		t.Errorf("RevokeAPIKey(nope) = %v, want ErrNotFound", err)
	}

	unknown, _ := NewKey()
	for name, k := range map[string]string{
		"unknown":      unknown,
		"empty":        "",
		"no prefix":    plain[4:],
		"uppercase":    strings.ToUpper(plain),
		"short":        plain[:35],
		"long":         plain + "0",
		"not hex":      "e2b_" + strings.Repeat("g", 32),
		"other prefix": "sk_" + plain[3:],
		"space":        plain + " ",
	} {
		_, err := s.AuthenticateKey(ctx, k)
		if !errors.Is(err, errdefs.ErrUnauthenticated) {
			t.Errorf("%s key: %v, want ErrUnauthenticated", name, err)
		}
		if err != nil && len(k) > 12 && strings.Contains(err.Error(), k[12:]) {
			t.Errorf("%s key: error %q repeats the secret part of the key", name, err)
		}
	}

	if _, _, err := s.CreateAPIKey(ctx, "Bad Team", "x"); !errdefs.IsInvalid(err) {
		t.Errorf("bad team: %v, want ErrInvalid", err)
	}
	if _, _, err := s.CreateAPIKey(ctx, "acme", strings.Repeat("n", 201)); !errdefs.IsInvalid(err) {
		t.Errorf("long name: %v, want ErrInvalid", err)
	}
	if _, err := s.ListAPIKeys(ctx, "Bad Team"); !errdefs.IsInvalid(err) {
		t.Errorf("ListAPIKeys(bad team): %v, want ErrInvalid", err)
	}
}
