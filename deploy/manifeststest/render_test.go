package manifeststest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// The manifests, relative to this package's directory.
var (
	kustomizeBase = filepath.Join("..", "kustomize", "base")
	helmChart     = filepath.Join("..", "helm", "warren")
)

// The kube-apiserver version envtest runs (the Makefile's ENVTEST_K8S_VERSION),
// told to Helm in place of a cluster's.
const kubeVersion = "v1.36.3"

// renderKustomize builds a kustomization as `kubectl apply -k` does, with
// kustomize's default load restrictions (files only from inside the
// kustomization, other kustomizations from anywhere).
func renderKustomize(dir string) ([]*unstructured.Unstructured, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	out, err := res.AsYaml()
	if err != nil {
		return nil, err
	}
	return decode(out)
}

// renderHelm renders the chart as `helm template --include-crds` does:
// CRDs first, then the templates, with the chart's values overridden by
// vals (validated against values.schema.json).
func renderHelm(vals map[string]any) ([]*unstructured.Unstructured, error) {
	chrt, err := loader.Load(helmChart)
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.Replace = true
	install.IncludeCRDs = true
	install.ReleaseName = "warren"
	install.Namespace = "default"
	if install.KubeVersion, err = common.ParseKubeVersion(kubeVersion); err != nil {
		return nil, err
	}
	r, err := install.Run(chrt, vals)
	if err != nil {
		return nil, fmt.Errorf("helm template: %w", err)
	}
	rel, ok := r.(*release.Release)
	if !ok {
		return nil, fmt.Errorf("helm returned a %T, not a release", r)
	}
	return decode([]byte(rel.Manifest))
}

// decode splits a multi-document YAML stream into objects.
func decode(stream []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(stream), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, fmt.Errorf("decoding the rendered manifests: %w", err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// mustRender renders both, failing the test on an error.
func mustRender(t *testing.T) (kustomized, helmed []*unstructured.Unstructured) {
	t.Helper()
	k, err := renderKustomize(kustomizeBase)
	if err != nil {
		t.Fatal(err)
	}
	h, err := renderHelm(nil)
	if err != nil {
		t.Fatal(err)
	}
	return k, h
}

// ids names each object kind/namespace/name, sorted.
func ids(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, id(o))
	}
	slices.Sort(out)
	return out
}

func id(o *unstructured.Unstructured) string {
	return strings.Join([]string{o.GetKind(), o.GetNamespace(), o.GetName()}, "/")
}

// find returns the object of that kind and name.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s among %v", kind, name, ids(objs))
	return nil
}
