package store

import (
	"context"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
)

// TestVolumes: one name per team; a sandbox's mounts are written with its
// record; a volume a live sandbox mounts cannot be
// deleted, one a destroyed sandbox mounted can; a mount of a volume that is
// gone fails the create whole.
func TestVolumes(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	v := Volume{ID: "vol1", Team: "t", Name: "data", Token: "vtk_1", SizeBytes: 1 << 20}
	if err := s.CreateVolume(ctx, v); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateVolume(ctx, Volume{ID: "vol2", Team: "t", Name: "data", Token: "x"}); !errdefs.IsAlreadyExists(err) {
		t.Errorf("a second volume named data: %v", err)
	}
	if err := s.CreateVolume(ctx, Volume{ID: "vol3", Team: "u", Name: "data", Token: "x"}); err != nil {
		t.Errorf("another team's volume named data: %v", err)
	}
	if got, err := s.VolumeByName(ctx, "t", "data"); err != nil || got.ID != "vol1" || got.Token != "vtk_1" {
		t.Errorf("VolumeByName: %+v, %v", got, err)
	}
	mounts := []VolumeMount{{VolumeID: "vol1", Path: "/data"}}
	if err := s.CreateSandbox(ctx, Sandbox{ID: "sb1", Team: "t", Template: "base", Runtime: "native", State: StateRunning, VolumeMounts: mounts}); err != nil {
		t.Fatal(err)
	}
	ms, err := s.SandboxVolumeMounts(ctx, "sb1")
	if err != nil || len(ms) != 1 || ms[0] != (VolumeMount{VolumeID: "vol1", Name: "data", Path: "/data"}) {
		t.Fatalf("the sandbox's mounts: %+v, %v", ms, err)
	}
	if err := s.DeleteVolume(ctx, "vol1"); !errdefs.IsConflict(err) {
		t.Errorf("delete a volume a running sandbox mounts: %v, want ErrConflict", err)
	}
	if err := s.CreateSandbox(ctx, Sandbox{ID: "sb2", Team: "t", Template: "base", Runtime: "native", State: StateCreating, VolumeMounts: []VolumeMount{{VolumeID: "nosuch", Path: "/x"}}}); !errdefs.IsNotFound(err) {
		t.Errorf("a mount of a missing volume: %v, want ErrNotFound", err)
	}
	if _, err := s.GetSandbox(ctx, "sb2"); !errdefs.IsNotFound(err) {
		t.Errorf("the refused create left its record: %v", err)
	}
	if err := s.UpdateSandboxState(ctx, "sb1", []SandboxState{StateRunning}, StateDestroyed, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteVolume(ctx, "vol1"); err != nil {
		t.Errorf("delete a volume only a destroyed sandbox mounted: %v", err)
	}
	if ms, err := s.SandboxVolumeMounts(ctx, "sb1"); err != nil || len(ms) != 0 {
		t.Errorf("mounts of the deleted volume remain: %+v, %v", ms, err)
	}
}
