package manifeststest

import (
	"path/filepath"
	"testing"
)

// The kustomize base applies to a real API server: every object is valid
// (schema, field names, PodSecurity admission of the namespace's label).
func TestKustomizeBaseApplies(t *testing.T) {
	objs, err := renderKustomize(kustomizeBase)
	if err != nil {
		t.Fatal(err)
	}
	applyRendered(t, objs)
	t.Logf("applied %d objects: %v", len(objs), ids(objs))
}

func TestKustomizeOverlayExampleApplies(t *testing.T) {
	objs, err := renderKustomize(filepath.Join("..", "kustomize", "overlays", "example"))
	if err != nil {
		t.Fatal(err)
	}
	applyRendered(t, objs)
	ds := find(t, objs, "DaemonSet", "warren-node")
	if img := container(t, ds)["image"]; img != "registry.example.com/warren:v0.1.0" {
		t.Errorf("the overlay's image is %v, want registry.example.com/warren:v0.1.0", img)
	}
}

// The Helm chart, with its default values, applies the same way.
func TestHelmChartApplies(t *testing.T) {
	objs, err := renderHelm(nil)
	if err != nil {
		t.Fatal(err)
	}
	applyRendered(t, objs)
	t.Logf("applied %d objects: %v", len(objs), ids(objs))
}
