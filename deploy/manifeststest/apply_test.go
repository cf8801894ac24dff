package manifeststest

import (
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Each way of installing warren applies to a real API server: every object is
// valid (schema, field names, defaults, PodSecurity admission of the
// namespace's label).
func TestManifestsApply(t *testing.T) {
	for _, c := range []struct {
		name   string
		render func() ([]*unstructured.Unstructured, error)
	}{
		{"kustomize base", func() ([]*unstructured.Unstructured, error) { return renderKustomize(kustomizeBase) }},
		{"kustomize example overlay", func() ([]*unstructured.Unstructured, error) { return renderKustomize(exampleOverlay) }},
		{"helm chart, default values", func() ([]*unstructured.Unstructured, error) { return renderHelm(nil) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs, err := c.render()
			if err != nil {
				t.Fatal(err)
			}
			if applyRendered(t, objs) {
				t.Logf("applied %d objects: %v", len(objs), ids(objs))
			}
		})
	}
}

// The overlay's changes reach the objects.
func TestKustomizeOverlayExample(t *testing.T) {
	objs, err := renderKustomize(exampleOverlay)
	if err != nil {
		t.Fatal(err)
	}
	node := container(t, find(t, objs, "DaemonSet", "warren-node"))
	if img := node["image"]; img != "registry.example.com/warren:v0.1.0" {
		t.Errorf("the overlay's image is %v, want registry.example.com/warren:v0.1.0", img)
	}
	if rt := envOf(node)["WARREN_DEFAULT_RUNTIME"]; rt != "gvisor" {
		t.Errorf("the overlay's default runtime is %q, want gvisor", rt)
	}
	if r := replicas(find(t, objs, "Deployment", "warren-gateway")); r != 3 {
		t.Errorf("the overlay's gateway replicas: %d, want 3", r)
	}
}

var exampleOverlay = filepath.Join("..", "kustomize", "overlays", "example")
