package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
)

// An exclusive claim keeps others off until released and names its holder;
// shared claims coexist but keep an exclusive one off.
func TestDeviceClaims(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	excl := []DeviceClaim{{Device: "x.com/gpu=0", Exclusive: true}}
	if err := s.ClaimDevices(ctx, "a", excl); err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimDevices(ctx, "a", excl); err != nil {
		t.Fatalf("claiming again: %v", err)
	}
	err := s.ClaimDevices(ctx, "b", append([]DeviceClaim{{Device: "x.com/nic=0", Exclusive: true}}, excl...))
	if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "sandbox a") {
		t.Fatalf("second exclusive claim: %v; want ErrConflict naming a", err)
	}
	if got, _ := s.DeviceClaims(ctx, "b"); len(got) != 0 {
		t.Fatalf("a refused claim left %v", got)
	}
	shared := []DeviceClaim{{Device: "x.com/fs=0"}}
	if err := s.ClaimDevices(ctx, "a", shared); err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimDevices(ctx, "b", shared); err != nil {
		t.Fatalf("second shared claim: %v", err)
	}
	if err := s.ClaimDevices(ctx, "c", []DeviceClaim{{Device: "x.com/fs=0", Exclusive: true}}); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("exclusive claim of a shared-held device: %v", err)
	}
	if err := s.ReleaseDevices(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimDevices(ctx, "b", excl); err != nil {
		t.Fatalf("claim after release: %v", err)
	}
	all, err := s.DeviceClaims(ctx, "")
	if err != nil || len(all) != 2 {
		t.Fatalf("claims = %v, %v; want b's two", all, err)
	}
}
