package kubetest_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
)

// placed creates sandboxes on nodes with labels, and reports them Running.
func placed(t *testing.T, c client.Client, ns string, nodes map[string]string, labels map[string]map[string]string) {
	t.Helper()
	ctx := context.Background()
	for name, node := range nodes {
		sb := sandbox(ns, name)
		sb.Labels = labels[name]
		sb.Spec.NodeName = node
		if err := c.Create(ctx, sb); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		sb.Status.Phase, sb.Status.Node, sb.Status.SandboxID = warrenv1.SandboxRunning, node, "id"+name
		if err := c.Status().Update(ctx, sb); err != nil {
			t.Fatalf("status of %s: %v", name, err)
		}
	}
}

func names(l *warrenv1.SandboxList) []string {
	var out []string
	for _, s := range l.Items {
		out = append(out, s.Name)
	}
	slices.Sort(out)
	return out
}

// A node watches the Sandboxes placed on it by field selector, and a user
// lists theirs by label: both are answered by the API server.
func TestSandboxSelectors(t *testing.T) {
	e, ns := env(t)
	placed(t, e.Client, ns,
		map[string]string{"a1": "node-a", "a2": "node-a", "b1": "node-b"},
		map[string]map[string]string{"a1": {"team": "red"}, "b1": {"team": "red"}, "a2": {"team": "blue"}})

	cases := []struct {
		name string
		opts []client.ListOption
		want []string
	}{
		{"spec.nodeName", []client.ListOption{client.MatchingFields{"spec.nodeName": "node-a"}}, []string{"a1", "a2"}},
		{"status.node", []client.ListOption{client.MatchingFields{"status.node": "node-b"}}, []string{"b1"}},
		{"status.sandboxID", []client.ListOption{client.MatchingFields{"status.sandboxID": "ida2"}}, []string{"a2"}},
		{"status.phase", []client.ListOption{client.MatchingFields{"status.phase": "Running"}}, []string{"a1", "a2", "b1"}},
		{"label", []client.ListOption{client.MatchingLabels{"team": "red"}}, []string{"a1", "b1"}},
		{"label and field", []client.ListOption{client.MatchingLabels{"team": "red"}, client.MatchingFields{"spec.nodeName": "node-a"}}, []string{"a1"}},
	}
	for _, tc := range cases {
		var l warrenv1.SandboxList
		if err := e.Client.List(context.Background(), &l, append(tc.opts, client.InNamespace(ns))...); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := names(&l); !slices.Equal(got, tc.want) {
			t.Errorf("%s: listed %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The printer columns are what `kubectl get sandboxes -o wide` shows: the
// API server's Table answer carries them, the wide ones at priority 1.
func TestSandboxPrinterColumns(t *testing.T) {
	e, ns := env(t)
	placed(t, e.Client, ns, map[string]string{"a1": "node-a"}, nil)

	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/apis/warren.dev/v1alpha1/namespaces", ns, "sandboxes").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("table: %v", err)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatalf("table: %v: %s", err, body)
	}
	var cols []string
	for _, c := range table.ColumnDefinitions {
		if c.Priority > 0 {
			cols = append(cols, c.Name+"(wide)")
			continue
		}
		cols = append(cols, c.Name)
	}
	want := []string{"Name", "Phase", "Node", "Template", "Age", "SandboxID(wide)", "Runtime(wide)", "Endpoint(wide)"}
	if !slices.Equal(cols, want) {
		t.Fatalf("columns %v, want %v", cols, want)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("%d rows, want 1", len(table.Rows))
	}
	row := table.Rows[0].Cells
	if row[0] != "a1" || row[1] != "Running" || row[2] != "node-a" || row[3] != "base" || row[5] != "ida1" {
		t.Fatalf("row %v", row)
	}
}
