package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/runtime"
)

// A sandbox holding devices has no memory saved (snapshot with memory,
// hibernate): ErrInvalid naming them (a 400; the idle hibernate pauses instead), before anything is touched.
func TestMemoryRefusesDevices(t *testing.T) {
	ctx := context.Background()
	m := &memoryImages{devices: func(_ context.Context, id string) (*runtime.Devices, error) {
		if id == "held" {
			return &runtime.Devices{Names: []string{"nvidia.com/gpu=0"}}, nil
		}
		return nil, nil
	}}
	if _, err := m.Hibernate(ctx, "held"); !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "nvidia.com/gpu=0") {
		t.Errorf("hibernate a device holder: %v", err)
	}
	if _, _, err := m.SnapshotMemory(ctx, "held", "snap", "g", false, nil); !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "devices") {
		t.Errorf("memory snapshot of a device holder: %v", err)
	}
	if err := m.refuseDevices(ctx, "free"); err != nil {
		t.Errorf("a sandbox without devices: %v", err)
	}
}
