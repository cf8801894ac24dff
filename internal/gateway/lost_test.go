package gateway

import (
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
)

// The fleet state knows a sandbox as Lost until a node takes it: restored
// elsewhere (its spec names another node: routed there) or back on its own.
func TestFleetStateLost(t *testing.T) {
	s := newFleetState()
	sb := &warrenv1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "s1"},
		Spec:   warrenv1.SandboxSpec{NodeName: "a"},
		Status: warrenv1.SandboxStatus{Phase: warrenv1.SandboxLost, Node: "a", SandboxID: "s1"}}
	s.setSandbox(sb)
	if _, ok := s.lostSandbox("s1"); !ok {
		t.Fatal("a Lost sandbox is not known as Lost")
	}
	restored := sb.DeepCopy()
	restored.Spec.NodeName = "b"
	s.setSandbox(restored)
	if _, ok := s.lostSandbox("s1"); ok {
		t.Fatal("a sandbox restored on another node is still known as Lost")
	}
	if n, _ := s.sandboxNode("s1"); n != "b" {
		t.Fatalf("a restored sandbox routes to %q, want b (its spec's node)", n)
	}
	s.setSandbox(sb)
	s.dropSandbox(sb)
	if _, ok := s.lostSandbox("s1"); ok {
		t.Fatal("a deleted object is still known as Lost")
	}
}

func TestIsRestorePath(t *testing.T) {
	for path, want := range map[string]bool{
		"/sandboxes/s1/connect": true, "/v2/sandboxes/s1/connect": true, "/sandboxes/s1/resume": true,
		"/sandboxes/s1/pause": false, "/sandboxes/s1": false, "/sandboxes/s2/connect": false,
	} {
		if got := isRestorePath(httptest.NewRequest("POST", path, nil), "s1"); got != want {
			t.Errorf("POST %s: %v, want %v", path, got, want)
		}
	}
	if isRestorePath(httptest.NewRequest("GET", "/sandboxes/s1/connect", nil), "s1") {
		t.Error("a GET restores")
	}
}

func TestLostMessage(t *testing.T) {
	sb := &warrenv1.Sandbox{Status: warrenv1.SandboxStatus{Phase: warrenv1.SandboxLost, Node: "a"}}
	if m := lostMessage("s1", sb); !strings.Contains(m, "node a") || !strings.Contains(m, "no other node holds a copy") {
		t.Errorf("without a copy: %q", m)
	}
	sb.Status.Replica = &warrenv1.SandboxReplica{Node: "b", Snapshot: "x", At: metav1.NowMicro()}
	if m := lostMessage("s1", sb); !strings.Contains(m, "restore it on node b") || !strings.Contains(m, "/sandboxes/s1/connect") {
		t.Errorf("with a copy: %q", m)
	}
}
