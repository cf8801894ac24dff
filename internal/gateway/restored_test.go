package gateway

import (
	"context"
	"io"
	"log/slog"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/kube/fleet"
)

// A gateway whose watch cache still shows a sandbox Lost, after another
// gateway restored it and pointed its object at the replica's node, finds
// that node in the API server instead of answering "Lost".
func TestCurrentNodeAfterARestoreElsewhere(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := warrenv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	obj := func(node string) *warrenv1.Sandbox {
		return &warrenv1.Sandbox{
			ObjectMeta: metav1.ObjectMeta{Name: "sb-s1", Namespace: "warren", Labels: map[string]string{fleet.LabelSandboxID: "s1"}},
			Spec:       warrenv1.SandboxSpec{NodeName: node},
			Status:     warrenv1.SandboxStatus{Phase: warrenv1.SandboxLost, Node: "a", SandboxID: "s1"},
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for node, want := range map[string]string{"b": "b", "a": "", "": ""} {
		api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(obj(node)).Build()
		m := &mover{keys: &keyStore{api: api, namespace: "warren"}, log: log}
		if got := m.currentNode(context.Background(), "s1", "a"); got != want {
			t.Errorf("object pointing at %q: currentNode = %q, want %q", node, got, want)
		}
	}
	var none *mover
	if got := none.currentNode(context.Background(), "s1", "a"); got != "" {
		t.Errorf("no API client: %q, want none", got)
	}
}
