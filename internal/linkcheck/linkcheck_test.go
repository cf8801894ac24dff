package linkcheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// kubePackage says whether an import path is a Kubernetes library or one
// of warren's packages built on them.
func kubePackage(path string) bool {
	for _, p := range []string{
		"k8s.io/", "sigs.k8s.io/",
		"github.com/warrenhq/warren/apis/",
		"github.com/warrenhq/warren/internal/kube/",
		"github.com/warrenhq/warren/internal/gateway",
	} {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// deps lists the packages ./cmd/warren links when built with tags.
func deps(t *testing.T, tags string) []string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(wd, "..", "..")
	cmd := exec.Command("go", "list", "-deps", "-tags", tags, "./cmd/warren")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps -tags %s ./cmd/warren: %v", tags, err)
	}
	return strings.Fields(string(out))
}

func TestWarrenLinksNoKubernetes(t *testing.T) {
	var kube []string
	for _, p := range deps(t, "seccomp") {
		if kubePackage(p) {
			kube = append(kube, p)
		}
	}
	if len(kube) > 0 {
		t.Errorf("bin/warren links %d Kubernetes package(s), which every sandbox start would initialise; keep them behind the kube build tag (warren-fleet): %s", len(kube), strings.Join(kube, " "))
	}
}

// The kube tag still builds warren-fleet with what the commands handed
// to it need.
func TestWarrenFleetLinksKubernetes(t *testing.T) {
	want := map[string]bool{
		"github.com/warrenhq/warren/internal/gateway":   false,
		"github.com/warrenhq/warren/internal/kube/node": false,
		"sigs.k8s.io/controller-runtime/pkg/client":     false,
	}
	for _, p := range deps(t, "seccomp,kube") {
		if _, ok := want[p]; ok {
			want[p] = true
		}
	}
	for p, found := range want {
		if !found {
			t.Errorf("warren-fleet (-tags kube) does not link %s", p)
		}
	}
}
