package store

import (
	"context"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
)

func TestIdempotencyKeyIsUniquePerTeam(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	sb := func(id, team, key string) Sandbox {
		return Sandbox{ID: id, Team: team, Template: "base", Runtime: "native", State: StateCreating, IdempotencyKey: key}
	}
	if err := s.CreateSandbox(ctx, sb("sb1", "acme", "k1")); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSandbox(ctx, sb("sb2", "acme", "k1")); !errdefs.IsAlreadyExists(err) {
		t.Errorf("second sandbox of a team with the same key: %v, want ErrAlreadyExists", err)
	}
	if err := s.CreateSandbox(ctx, sb("sb3", "other", "k1")); err != nil {
		t.Errorf("another team's sandbox with the same key: %v", err)
	}
	// Sandboxes without a key are not held to one per team.
	for _, id := range []string{"sb4", "sb5"} {
		if err := s.CreateSandbox(ctx, sb(id, "acme", "")); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.SandboxByIdempotencyKey(ctx, "acme", "k1")
	if err != nil || got.ID != "sb1" || got.IdempotencyKey != "k1" {
		t.Errorf("SandboxByIdempotencyKey = %s %q, %v; want sb1", got.ID, got.IdempotencyKey, err)
	}
	if _, err := s.SandboxByIdempotencyKey(ctx, "acme", "k2"); !errdefs.IsNotFound(err) {
		t.Errorf("unknown key: %v, want ErrNotFound", err)
	}
	if _, err := s.SandboxByIdempotencyKey(ctx, "acme", ""); !errdefs.IsNotFound(err) {
		t.Errorf("empty key: %v, want ErrNotFound", err)
	}

	if err := s.ForgetIdempotencyKey(ctx, "acme", "k1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SandboxByIdempotencyKey(ctx, "acme", "k1"); !errdefs.IsNotFound(err) {
		t.Errorf("forgotten key: %v, want ErrNotFound", err)
	}
	if err := s.CreateSandbox(ctx, sb("sb6", "acme", "k1")); err != nil {
		t.Errorf("a forgotten key serves a new sandbox: %v", err)
	}
	if got, err := s.GetSandbox(ctx, "sb1"); err != nil || got.IdempotencyKey != "" {
		t.Errorf("sandbox of a forgotten key: %q, %v; want kept, without its key", got.IdempotencyKey, err)
	}
	if got, _ := s.SandboxByIdempotencyKey(ctx, "other", "k1"); got.ID != "sb3" {
		t.Errorf("forgetting acme's key touched other's: %q", got.ID)
	}
}

func TestIdempotencyKeyValidation(t *testing.T) {
	for key, ok := range map[string]bool{
		"":                       true,
		"retry-7f3a":             true,
		"with space and ~!@#":    true,
		strings.Repeat("k", 255): true,
		strings.Repeat("k", 256): false,
		"new\nline":              false,
		"tab\tkey":               false,
		"é":                      false,
	} {
		err := ValidateIdempotencyKey(key)
		if ok != (err == nil) {
			t.Errorf("ValidateIdempotencyKey(%.20q) = %v, want ok=%v", key, err, ok)
		}
		if err != nil && !errdefs.IsInvalid(err) {
			t.Errorf("ValidateIdempotencyKey(%.20q) = %v, want ErrInvalid", key, err)
		}
	}
	s, _ := openTest(t)
	err := s.CreateSandbox(context.Background(), Sandbox{ID: "sb1", Team: "acme", Template: "base", Runtime: "native", State: StateCreating, IdempotencyKey: "bad\x00"})
	if !errdefs.IsInvalid(err) {
		t.Errorf("CreateSandbox with a bad key: %v, want ErrInvalid", err)
	}
}
