package manifeststest

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The namespace's PodSecurity label is what the pods need, no less: the
// API server's PodSecurity admission admits the node pod under `privileged`
// and refuses it under `baseline`, and admits the gateway pod even under
// `restricted`.
func TestPodSecurityLevels(t *testing.T) {
	objs, err := renderKustomize(kustomizeBase)
	if err != nil {
		t.Fatal(err)
	}
	if lvl := find(t, objs, "Namespace", "warren").GetLabels()["pod-security.kubernetes.io/enforce"]; lvl != "privileged" {
		t.Errorf("namespace warren enforces %q, want privileged", lvl)
	}
	node := podOf(t, find(t, objs, "DaemonSet", "warren-node"))
	gateway := podOf(t, find(t, objs, "Deployment", "warren-gateway"))
	for _, c := range []struct {
		pod     *corev1.Pod
		level   string
		allowed bool
	}{
		{node, "privileged", true},
		{node, "baseline", false},
		{gateway, "restricted", true},
	} {
		err := createInLevel(t, c.pod, c.level)
		switch {
		case c.allowed && err != nil:
			t.Errorf("%s pod refused under PodSecurity %s: %v", c.pod.GenerateName, c.level, err)
		case !c.allowed && err == nil:
			t.Errorf("%s pod admitted under PodSecurity %s, which should refuse it", c.pod.GenerateName, c.level)
		case !c.allowed && !strings.Contains(err.Error(), "violates PodSecurity"):
			t.Errorf("%s pod under %s: refused, but not by PodSecurity: %v", c.pod.GenerateName, c.level, err)
		}
	}
}

// podOf makes the pod a workload's controller would make of its template.
func podOf(t *testing.T, o *unstructured.Unstructured) *corev1.Pod {
	t.Helper()
	tmpl, _, err := unstructured.NestedMap(o.Object, "spec", "template")
	if err != nil {
		t.Fatal(err)
	}
	var pt corev1.PodTemplateSpec
	fromUnstructured(t, &unstructured.Unstructured{Object: tmpl}, &pt)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: o.GetName() + "-", Labels: pt.Labels}, Spec: pt.Spec}
}

// createInLevel creates the pod, with dry run, in a new namespace that
// enforces the PodSecurity level.
func createInLevel(t *testing.T, pod *corev1.Pod, level string) error {
	t.Helper()
	ctx := context.Background()
	c := controlPlane(t).Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "warren-psa-",
		Labels:       map[string]string{"pod-security.kubernetes.io/enforce": level},
	}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	p := pod.DeepCopy()
	p.Namespace = ns.Name
	// The pods' service accounts exist only in warren's namespace.
	p.Spec.ServiceAccountName = ""
	return c.Create(ctx, p, client.DryRunAll)
}
