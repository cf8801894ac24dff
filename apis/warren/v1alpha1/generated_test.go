package v1alpha1_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/warrenhq/warren/internal/testutil"
)

// TestGeneratedIsFresh regenerates the deepcopy functions and the CRDs (with
// deploy/crds' kustomization and the Helm chart's copy) into a temporary tree
// and fails when the committed ones differ: a type or a marker was edited
// without make generate.
func TestGeneratedIsFresh(t *testing.T) {
	gen := os.Getenv("WARREN_CONTROLLER_GEN")
	if gen == "" {
		testutil.Missing(t, "WARREN_CONTROLLER_GEN is not set: this test runs controller-gen; `make controller-gen` builds it and `make test` sets it")
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "scripts", "gen-k8s.sh"), out)
	cmd.Env = append(os.Environ(), "CONTROLLER_GEN="+gen)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen-k8s.sh: %v\n%s", err, b)
	}
	for _, dir := range []string{"apis/warren/v1alpha1", "deploy/crds", "deploy/helm/warren/crds"} {
		fresh := generatedIn(t, filepath.Join(out, dir))
		committed := generatedIn(t, filepath.Join(root, dir))
		for _, name := range union(fresh, committed) {
			f, c := fresh[name], committed[name]
			switch {
			case c == nil:
				t.Errorf("%s/%s is generated but not committed: run make generate", dir, name)
			case f == nil:
				t.Errorf("%s/%s is committed but no longer generated: run make generate", dir, name)
			case !bytes.Equal(f, c):
				t.Errorf("%s/%s differs from a fresh generation: run make generate", dir, name)
			}
		}
	}
}

// generatedIn reads what gen-k8s.sh writes in dir: the CRD manifests (and
// deploy/crds' kustomization), and zz_generated files.
func generatedIn(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		name := e.Name()
		if ok, _ := filepath.Match("zz_generated.*.go", name); !ok && filepath.Ext(name) != ".yaml" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
	}
	return files
}

func union(a, b map[string][]byte) []string {
	var names []string
	for n := range a {
		names = append(names, n)
	}
	for n := range b {
		if _, ok := a[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}
