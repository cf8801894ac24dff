package fleet_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/kube/fleet"
	"github.com/warrenhq/warren/internal/kube/kubetest"
)

// A kubeconfig file written for a control plane gives a client that reads
// and writes both built-in and warren.dev objects.
func TestNewClientFromKubeconfig(t *testing.T) {
	env := kubetest.Start(t)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(path); err != nil {
		t.Fatal(err)
	}
	c, cfg, err := fleet.NewClient(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host == "" {
		t.Fatal("config without a host")
	}
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleet.DefaultNamespace}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	var nodes warrenv1.WarrenNodeList
	if err := c.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
}

func TestNewClientErrors(t *testing.T) {
	if _, _, err := fleet.NewClient(filepath.Join(t.TempDir(), "absent")); err == nil {
		t.Fatal("no error for a missing kubeconfig file")
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, _, err := fleet.NewClient(""); err == nil || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Fatalf("outside a pod: %v", err)
	}
}

func TestLeaseName(t *testing.T) {
	if got := fleet.LeaseName("n1"); got != "warren-node-n1" {
		t.Fatal(got)
	}
}
