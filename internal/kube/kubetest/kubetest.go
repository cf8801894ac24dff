// Package kubetest runs a real Kubernetes control plane for tests: etcd and
// kube-apiserver started by controller-runtime's envtest, with warren's CRDs
// (deploy/crds) installed and established, and a client that knows
// warren.dev's types. The binaries are found through KUBEBUILDER_ASSETS,
// which the Makefile sets after building them (make envtest); no root is
// needed, so these tests run in make test-unit.
package kubetest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/testutil"
)

// AssetsEnv names the directory holding the etcd and kube-apiserver
// binaries (envtest's own variable).
const AssetsEnv = "KUBEBUILDER_ASSETS"

// errMissing marks a control-plane binary that is not there: a missing
// prerequisite (testutil.Missing), not a failure of the code under test.
var errMissing = errors.New("missing prerequisite")

// Env is a running control plane with warren's CRDs installed.
type Env struct {
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Client reads and writes core and warren.dev objects, uncached.
	Client client.Client
	Scheme *runtime.Scheme
	// Started is how long etcd, kube-apiserver and the CRDs took to be
	// ready.
	Started time.Duration

	env *envtest.Environment
	out *testutil.SyncBuffer
}

// Start starts a control plane for one test and stops it when the test
// ends. A missing binary fails the test (or skips it, with
// WARREN_TEST_ALLOW_SKIP=1).
func Start(t testing.TB) *Env {
	t.Helper()
	e, err := Launch()
	Require(t, e, err)
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	return e
}

// Require ends the test unless Launch succeeded: a missing binary through
// testutil.Missing, any other error as a failure. A package whose tests
// share one control plane (Launch in TestMain) calls it at the top of each.
func Require(t testing.TB, e *Env, err error) {
	t.Helper()
	if errors.Is(err, errMissing) {
		testutil.Missing(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if e == nil {
		t.Fatal("no control plane: Launch was not called")
	}
}

// Launch starts a control plane; the caller stops it with Stop. For a
// TestMain that shares one among a package's tests.
func Launch() (*Env, error) {
	assets, err := assetsDir()
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := warrenv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	e := &Env{Scheme: scheme, out: &testutil.SyncBuffer{}}
	e.env = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{CRDDir()},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
		// Two cores shared with other test binaries: the defaults (20 s)
		// are tight for a cold start.
		ControlPlaneStartTimeout: time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	// Their logs are kept to explain a failed start, and dropped otherwise.
	api := e.env.ControlPlane.GetAPIServer()
	api.Out, api.Err = e.out, e.out
	begin := time.Now()
	cfg, err := e.env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting etcd and kube-apiserver from %s: %w\nkube-apiserver's output:\n%s", assets, err, tail(e.out.String()))
	}
	e.Started = time.Since(begin)
	e.Config = cfg
	if e.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		_ = e.env.Stop()
		return nil, fmt.Errorf("client of the test control plane: %w", err)
	}
	return e, nil
}

// Stop stops kube-apiserver and etcd and removes their files.
func (e *Env) Stop() error { return e.env.Stop() }

// CRDDir is the directory of warren's generated CRDs (deploy/crds).
func CRDDir() string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "deploy", "crds")
}

// assetsDir returns the directory holding etcd and kube-apiserver.
func assetsDir() (string, error) {
	dir := os.Getenv(AssetsEnv)
	if dir == "" {
		return "", fmt.Errorf("%s is not set: the tests of warren's Kubernetes resources need etcd and kube-apiserver; `make envtest` builds them and `make test` sets it: %w", AssetsEnv, errMissing)
	}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%s=%s holds no executable %s: build it with `make envtest`: %w", AssetsEnv, dir, name, errMissing)
		}
	}
	return dir, nil
}

// tail keeps the end of a long log, where a failed start says why.
func tail(s string) string {
	const keep = 4000
	if len(s) > keep {
		return "…" + s[len(s)-keep:]
	}
	return s
}

// WriteKubeconfig writes a kubeconfig file (mode 0600) for an administrator
// of this control plane (group system:masters), for daemons the test starts
// as processes.
func (e *Env) WriteKubeconfig(path string) error {
	user, err := e.env.AddUser(envtest.User{Name: "warren-test-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("adding a test administrator: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig of the test administrator: %w", err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return nil
}
