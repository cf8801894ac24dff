package manifeststest

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A namespace of the user's own, made by them: no Namespace object, and every
// namespaced object and binding subject in theirs.
func TestHelmNamespaceValues(t *testing.T) {
	objs, err := renderHelm(map[string]any{"namespace": map[string]any{"name": "sandboxes", "create": false}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace":
			t.Errorf("namespace.create=false renders %s", id(o))
		case "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding":
		default:
			if o.GetNamespace() != "sandboxes" {
				t.Errorf("%s is not in namespace sandboxes", id(o))
			}
		}
		if strings.HasSuffix(o.GetKind(), "Binding") {
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			for _, s := range subjects {
				if s.(map[string]any)["namespace"] != "sandboxes" {
					t.Errorf("%s binds a subject in %v", id(o), s)
				}
			}
		}
	}
}

// The values the chart documents reach the pods.
func TestHelmValuesReachThePods(t *testing.T) {
	objs, err := renderHelm(map[string]any{
		"image":   map[string]any{"repository": "registry.example.com/warren", "tag": "v1"},
		"domain":  "sb.example.com",
		"node":    map[string]any{"leaseDuration": "30s", "runtimes": map[string]any{"default": "gvisor", "runsc": "/usr/local/bin/runsc"}},
		"gateway": map[string]any{"replicas": 4},
	})
	if err != nil {
		t.Fatal(err)
	}
	node := container(t, find(t, objs, "DaemonSet", "warren-node"))
	gw := find(t, objs, "Deployment", "warren-gateway")
	if img := node["image"]; img != "registry.example.com/warren:v1" {
		t.Errorf("node image %v", img)
	}
	args := stringsOf(node["args"])
	for _, want := range []string{"--lease-duration=30s", "--domain=sb.example.com", "--cluster=kubernetes"} {
		if !slices.Contains(args, want) {
			t.Errorf("node args %v lack %s", args, want)
		}
	}
	env := envOf(node)
	for name, want := range map[string]string{"WARREN_DEFAULT_RUNTIME": "gvisor", "WARREN_RUNSC": "/usr/local/bin/runsc"} {
		if env[name] != want {
			t.Errorf("node env %s=%q, want %q", name, env[name], want)
		}
	}
	if r := gw.Object["spec"].(map[string]any)["replicas"]; r != int64(4) && r != float64(4) {
		t.Errorf("gateway replicas %v (%T), want 4", r, r)
	}
	if !slices.Contains(stringsOf(container(t, gw)["args"]), "--domain=sb.example.com") {
		t.Errorf("gateway args %v lack the domain", container(t, gw)["args"])
	}
}

// Bad values fail the render with a message naming the value.
func TestHelmRefusesBadValues(t *testing.T) {
	for _, c := range []struct {
		vals map[string]any
		want string
	}{
		{map[string]any{"node": map[string]any{"storage": "zfs"}}, "storage"},
		{map[string]any{"node": map[string]any{"leaseDuration": "15"}}, "leaseDuration"},
		{map[string]any{"gateway": map[string]any{"replicas": 0}}, "replicas"},
		{map[string]any{"namespace": map[string]any{"name": "Warren_NS"}}, "name"},
		{map[string]any{"node": map[string]any{"runtimes": map[string]any{"default": "kata"}}}, "default"},
	} {
		_, err := renderHelm(c.vals)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("values %v: error %v, want one naming %s", c.vals, err, c.want)
		}
	}
}
