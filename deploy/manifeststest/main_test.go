package manifeststest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

func controlPlane(t *testing.T) *kubetest.Env {
	t.Helper()
	kubetest.Require(t, shared, launchErr)
	return shared
}

// fieldOwner is the field manager of the tests' applies.
const fieldOwner = "warren-manifests-test"

// apply applies one object with server-side apply, as `kubectl apply
// --server-side` does: with strict field validation (a misspelt field is an
// error, not dropped, which is what an apply without it does), forcing
// ownership of fields other managers set. With dryRun the API server
// validates, defaults and admits it but stores nothing.
func apply(ctx context.Context, c client.Client, o *unstructured.Unstructured, dryRun bool) error {
	body, err := json.Marshal(o.Object)
	if err != nil {
		return err
	}
	opts := []client.PatchOption{client.FieldOwner(fieldOwner), client.ForceOwnership, client.FieldValidation(metav1.FieldValidationStrict)}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := c.Patch(ctx, o.DeepCopy(), client.RawPatch(types.ApplyPatchType, body), opts...); err != nil {
		return fmt.Errorf("%s: %w", id(o), err)
	}
	return nil
}

// applyRendered applies what a render made to the API server: namespaces and
// CRDs for real (the namespaced objects need their namespace, and custom
// objects their CRD), then every object with server-side dry run.
func applyRendered(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	c := controlPlane(t).Client
	for _, o := range objs {
		if o.GetKind() == "Namespace" || o.GetKind() == "CustomResourceDefinition" {
			if err := apply(ctx, c, o, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, o := range objs {
		if err := apply(ctx, c, o, true); err != nil {
			t.Error(err)
		}
	}
}
