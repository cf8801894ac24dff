package kubetest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
)

// rejected checks that the API server refused a write as invalid, naming
// the field and saying what is wrong with it.
func rejected(t *testing.T, what string, err error, field, says string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: accepted, want it rejected", what)
		return
	}
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), says) {
		t.Errorf("%s: got %v; want an Invalid error naming %s and saying %q", what, err, field, says)
	}
}

func TestSandboxValidation(t *testing.T) {
	e, ns := env(t)
	cases := []struct {
		name   string
		edit   func(*warrenv1.Sandbox)
		field  string
		reason string
	}{
		{"negative memory", func(s *warrenv1.Sandbox) { s.Spec.Limits.Memory = ptr.To(resource.MustParse("-1Gi")) },
			"spec.limits.memory", "memory must not be negative"},
		{"negative cpu", func(s *warrenv1.Sandbox) { s.Spec.Limits.CPU = ptr.To(resource.MustParse("-500m")) },
			"spec.limits.cpu", "cpu must not be negative"},
		{"negative disk", func(s *warrenv1.Sandbox) { s.Spec.Limits.Disk = ptr.To(resource.MustParse("-1")) },
			"spec.limits.disk", "disk must not be negative"},
		{"negative pids", func(s *warrenv1.Sandbox) { s.Spec.Limits.Pids = ptr.To[int64](-1) },
			"spec.limits.pids", "greater than or equal to 0"},
		{"unknown runtime", func(s *warrenv1.Sandbox) { s.Spec.Runtime = "kata" },
			"spec.runtime", `Unsupported value: "kata"`},
		{"bad template name", func(s *warrenv1.Sandbox) { s.Spec.Template = "Base/../x" },
			"spec.template", "should match"},
		{"template and snapshot", func(s *warrenv1.Sandbox) { s.Spec.FromSnapshot = "s1x2" },
			"spec", "template and fromSnapshot exclude each other"},
		{"negative timeout", func(s *warrenv1.Sandbox) { s.Spec.Timeout = &metav1.Duration{Duration: -time.Second} },
			"spec.timeout", "should match"},
		{"unknown phase", func(s *warrenv1.Sandbox) { s.Status.Phase = "Sleeping" },
			"status.phase", `Unsupported value: "Sleeping"`},
	}
	for _, tc := range cases {
		sb := sandbox(ns, "bad")
		tc.edit(sb)
		status := sb.Status
		err := e.Client.Create(context.Background(), sb)
		if err == nil {
			// A create drops the status: it is checked on its own write.
			if status.Phase != "" {
				sb.Status = status
				err = e.Client.Status().Update(context.Background(), sb)
			}
			_ = e.Client.Delete(context.Background(), sb)
		}
		rejected(t, tc.name, err, tc.field, tc.reason)
	}
}

func TestPoolAndNodeValidation(t *testing.T) {
	e, ns := env(t)
	ctx := context.Background()
	pool := func(edit func(*warrenv1.SandboxPoolSpec)) *warrenv1.SandboxPool {
		p := &warrenv1.SandboxPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "bad-"},
			Spec: warrenv1.SandboxPoolSpec{Template: "base", MinPerNode: 2}}
		edit(&p.Spec)
		return p
	}
	rejected(t, "max below min", e.Client.Create(ctx, pool(func(s *warrenv1.SandboxPoolSpec) { s.MaxPerNode = 1 })),
		"spec", "maxPerNode must be at least minPerNode")
	rejected(t, "negative min", e.Client.Create(ctx, pool(func(s *warrenv1.SandboxPoolSpec) { s.MinPerNode = -1 })),
		"spec.minPerNode", "greater than or equal to 0")
	rejected(t, "short ttl", e.Client.Create(ctx, pool(func(s *warrenv1.SandboxPoolSpec) { s.TTL = &metav1.Duration{Duration: 5 * time.Second} })),
		"spec.ttl", "ttl must be 0 or at least 10s")
	rejected(t, "no template", e.Client.Create(ctx, pool(func(s *warrenv1.SandboxPoolSpec) { s.Template = "" })),
		"spec.template", "at least 1 chars long")
	rejected(t, "pool runtime", e.Client.Create(ctx, pool(func(s *warrenv1.SandboxPoolSpec) { s.Runtime = "kata" })),
		"spec.runtime", `Unsupported value: "kata"`)

	node := &warrenv1.WarrenNode{ObjectMeta: metav1.ObjectMeta{Name: "node-bad"}}
	if err := e.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(ctx, node) })
	node.Status.Used.Sandboxes = -3
	rejected(t, "negative sandboxes", e.Client.Status().Update(ctx, node), "status.used.sandboxes", "greater than or equal to 0")
	var got warrenv1.WarrenNode
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(node), &got); err != nil || got.Status.Used.Sandboxes != 0 {
		t.Fatalf("the rejected status was stored: %+v, %v", got.Status, err)
	}
}
