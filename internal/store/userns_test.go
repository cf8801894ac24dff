package store

import (
	"context"
	"errors"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Slots go lowest-free first, stay a sandbox's until released, are reused
// once released, and run out with ErrResourceExhausted.
func TestUserNSSlots(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	get := func(id string) int {
		t.Helper()
		n, err := s.UserNSSlot(ctx, id, 3)
		if err != nil {
			t.Fatalf("UserNSSlot(%s): %v", id, err)
		}
		return n
	}
	if a, b, c := get("a"), get("b"), get("c"); a != 0 || b != 1 || c != 2 {
		t.Fatalf("slots = %d %d %d; want 0 1 2", a, b, c)
	}
	if a := get("a"); a != 0 {
		t.Errorf("asking again gave slot %d; want the same 0", a)
	}
	if _, err := s.UserNSSlot(ctx, "d", 3); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Errorf("a fourth sandbox with 3 slots: %v; want ErrResourceExhausted", err)
	}
	for range 2 {
		if err := s.ReleaseUserNSSlot(ctx, "b"); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, err := s.UserNSSlotOf(ctx, "b"); ok || err != nil {
		t.Errorf("released b still has a slot (%v)", err)
	}
	if d := get("d"); d != 1 {
		t.Errorf("after releasing b's slot 1, d got %d; want 1", d)
	}
}
