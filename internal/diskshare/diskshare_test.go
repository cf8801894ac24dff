package diskshare

import (
	"context"
	"errors"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/storage/dir"
)

func TestDefaults(t *testing.T) {
	const gib = int64(1) << 30
	for _, c := range []struct{ size, quota, reserve int64 }{
		{20 * gib, 2 * gib, gib},           // the default pool image: a tenth, a twentieth
		{200 * gib, 10 * gib, 4 * gib},     // both at their ceilings
		{2 * gib, 2 * gib / 10, 256 << 20}, // the reserve at its floor
		{300 << 20, 30 << 20, 150 << 20},   // never more than half the pool
	} {
		if got := DefaultQuota(c.size); got != c.quota {
			t.Errorf("DefaultQuota(%d) = %d, want %d", c.size, got, c.quota)
		}
		if got := DefaultReserve(c.size); got != c.reserve {
			t.Errorf("DefaultReserve(%d) = %d, want %d", c.size, got, c.reserve)
		}
	}
}

func TestCapFor(t *testing.T) {
	for _, c := range []struct{ used, avail, reserve, want int64 }{
		{0, 100, 20, 80},   // empty groups: what is free beyond the reserve
		{50, 100, 20, 130}, // held plus the free part
		{50, 10, 20, 50},   // inside the reserve: no more writes
		{0, 10, 20, 1},     // never 0, which would lift the cap
	} {
		if got := CapFor(c.used, c.avail, c.reserve); got != c.want {
			t.Errorf("CapFor(%d, %d, %d) = %d, want %d", c.used, c.avail, c.reserve, got, c.want)
		}
	}
}

// fakePool is a GroupsCap that records the cap it is given.
type fakePool struct {
	storage.Storage
	size, avail, used, cap int64
	unsupported            bool
}

func (f *fakePool) Name() string                                { return "fake" }
func (f *fakePool) JoinGroupsCap(context.Context, string) error { return nil }

func (f *fakePool) SetGroupsCap(_ context.Context, b int64) error { f.cap = b; return nil }
func (f *fakePool) GroupsUsage(context.Context) (int64, int64, error) {
	if f.unsupported {
		return 0, 0, errdefs.ErrUnsupported
	}
	return f.used, f.cap, nil
}
func (f *fakePool) Space(context.Context) (int64, int64, error) { return f.size, f.avail, nil }

func TestNew(t *testing.T) {
	ctx := context.Background()
	const gib = int64(1) << 30
	p := &fakePool{size: 20 * gib, avail: 15 * gib, used: 3 * gib}
	s, quota, err := New(ctx, p, Options{DefaultQuota: Auto, Reserve: Auto})
	if err != nil || s == nil || quota != 2*gib {
		t.Fatalf("New auto: share %v quota %d err %v", s, quota, err)
	}
	if p.cap != 3*gib+14*gib {
		t.Errorf("cap %d, want held + free beyond the 1 GiB reserve", p.cap)
	}
	p.avail = gib / 2 // the pool filled into its reserve
	if err := s.Apply(ctx); err != nil || p.cap != p.used {
		t.Errorf("cap %d (%v) once the pool is inside its reserve; want what the groups hold, %d", p.cap, err, p.used)
	}

	p = &fakePool{size: 20 * gib, avail: 15 * gib, cap: 123}
	s, quota, err = New(ctx, p, Options{DefaultQuota: 0, Reserve: 0})
	if err != nil || s != nil || quota != 0 || p.cap != 0 {
		t.Errorf("New off: share %v quota %d cap %d err %v; want none, and the cap lifted", s, quota, p.cap, err)
	}

	p = &fakePool{size: gib, unsupported: true}
	if s, quota, err = New(ctx, p, Options{DefaultQuota: Auto, Reserve: Auto}); err != nil || s != nil || quota != 0 {
		t.Errorf("New without quotas, auto: share %v quota %d err %v; want neither", s, quota, err)
	}
	if _, _, err = New(ctx, p, Options{DefaultQuota: Auto, Reserve: 1 << 20}); !errors.Is(err, errdefs.ErrUnsupported) {
		t.Errorf("New without quotas, reserve asked for: %v, want ErrUnsupported", err)
	}
	if _, _, err = New(ctx, &fakePool{size: gib}, Options{Reserve: 2 * gib}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("reserve above the pool: %v, want ErrInvalid", err)
	}
	if _, _, err = New(ctx, &fakePool{size: gib}, Options{Reserve: -2}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("reserve -2: %v, want ErrInvalid", err)
	}
	d, err := dir.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if s, quota, err = New(ctx, d, Options{DefaultQuota: Auto, Reserve: Auto}); err != nil || s != nil || quota != 0 {
		t.Errorf("New on dir storage: share %v quota %d err %v; want neither", s, quota, err)
	}
}
