package placement_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/placement"
)

// TestDevices: a create asking for devices goes to a node that has each
// free; when none has, the error says so and is a "full now" one (a
// holder's delete frees the device).
func TestDevices(t *testing.T) {
	gpu, none := node("gpu"), node("none")
	gpu.Devices = []string{"nvidia.com/gpu=0", "nvidia.com/gpu=1"}
	d, err := placement.Choose([]placement.Node{none, gpu}, placement.Request{Devices: []string{"nvidia.com/gpu=1"}}, rng(1))
	if err != nil || d.Node != "gpu" {
		t.Fatalf("got %v, %v; want gpu", d, err)
	}
	_, err = placement.Choose([]placement.Node{none, gpu}, placement.Request{Devices: []string{"nvidia.com/gpu=0", "nvidia.com/gpu=2"}}, rng(1))
	if !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), string(placement.NoDevices)) {
		t.Fatalf("no node with every device: %v", err)
	}
}
