package manifeststest

import (
	"reflect"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// kustomize and Helm (default values) make the same objects: the same kinds
// and names, the same RBAC rules and bindings, and the same pod templates and
// Service; they may differ in metadata labels only.
func TestKustomizeAndHelmMakeTheSameObjects(t *testing.T) {
	k, h := mustRender(t)
	if a, b := ids(k), ids(h); !slices.Equal(a, b) {
		t.Fatalf("kustomize makes\n  %v\nHelm makes\n  %v", a, b)
	}
	same := map[string][]string{
		"Role":                     {"rules"},
		"ClusterRole":              {"rules"},
		"RoleBinding":              {"roleRef", "subjects"},
		"ClusterRoleBinding":       {"roleRef", "subjects"},
		"DaemonSet":                {"spec"},
		"Deployment":               {"spec"},
		"Service":                  {"spec"},
		"CustomResourceDefinition": {"spec"},
	}
	for _, ko := range k {
		ho := find(t, h, ko.GetKind(), ko.GetName())
		for _, field := range same[ko.GetKind()] {
			kv, _, _ := unstructured.NestedFieldNoCopy(ko.Object, field)
			hv, _, _ := unstructured.NestedFieldNoCopy(ho.Object, field)
			if !reflect.DeepEqual(kv, hv) {
				t.Errorf("%s: %s differs\nkustomize: %v\nHelm:      %v", id(ko), field, kv, hv)
			}
		}
		if kl, hl := ko.GetLabels()["pod-security.kubernetes.io/enforce"], ho.GetLabels()["pod-security.kubernetes.io/enforce"]; kl != hl {
			t.Errorf("%s: PodSecurity %q in kustomize, %q in Helm", id(ko), kl, hl)
		}
	}
}

// container returns the first container of a workload's pod template.
func container(t *testing.T, o *unstructured.Unstructured) map[string]any {
	t.Helper()
	cs, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	if err != nil || len(cs) == 0 {
		t.Fatalf("%s has no containers (%v)", id(o), err)
	}
	c, ok := cs[0].(map[string]any)
	if !ok {
		t.Fatalf("%s: container is a %T", id(o), cs[0])
	}
	return c
}

// stringsOf reads a list of strings (a container's args).
func stringsOf(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, e := range list {
		s, _ := e.(string)
		out = append(out, s)
	}
	return out
}

// envOf maps a container's plain env variables to their values.
func envOf(c map[string]any) map[string]string {
	list, _ := c["env"].([]any)
	env := map[string]string{}
	for _, e := range list {
		m, _ := e.(map[string]any)
		name, _ := m["name"].(string)
		value, _ := m["value"].(string)
		env[name] = value
	}
	return env
}
