package kubetest_test

import (
	"context"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warrenhq/warren/internal/kube/kubetest"
)

// The package's tests share one control plane: starting it is most of their
// time.
var (
	shared    *kubetest.Env
	launchErr error
)

func TestMain(m *testing.M) {
	shared, launchErr = kubetest.Launch()
	code := m.Run()
	if shared != nil {
		if err := shared.Stop(); err != nil && code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// env returns the shared control plane and a namespace of the test's own.
func env(t *testing.T) (*kubetest.Env, string) {
	t.Helper()
	kubetest.Require(t, shared, launchErr)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "warren-test-"}}
	if err := shared.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("namespace: %v", err)
	}
	return shared, ns.Name
}

func TestControlPlaneStarts(t *testing.T) {
	e, _ := env(t)
	// The figure the docs quote: etcd, kube-apiserver and the CRDs ready.
	t.Logf("control plane and CRDs ready in %v", e.Started.Round(1e6))
}
