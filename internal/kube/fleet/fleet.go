// Package fleet holds the names every part of warren's Kubernetes mode agrees
// on (labels, finalizer, Secret and Lease names) and the one way to build a
// client of the API server, so the node, the gateway and the controllers
// cannot drift apart on a spelling.
package fleet

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
)

// DefaultNamespace holds every namespaced object warren writes unless
// --kube-namespace says otherwise.
const DefaultNamespace = "warren"

// Labels on Sandbox objects (and, for LabelAPIKey and LabelTeam, on API key
// Secrets).
const (
	LabelNode      = "warren.dev/node"
	LabelSandboxID = "warren.dev/sandbox-id"
	LabelTeam      = "warren.dev/team"
	LabelTemplate  = "warren.dev/template"
	// LabelOrigin says who made a Sandbox object: OriginAPI when a node
	// publishes a sandbox created through its API, OriginKube when a user
	// applied it.
	LabelOrigin = "warren.dev/origin"
	OriginAPI   = "api"
	OriginKube  = "kube"
	// LabelAPIKey marks a Secret that holds a fleet-wide API key.
	LabelAPIKey = "warren.dev/api-key"
)

// Finalizer is on every Sandbox object a node holds: deleting the object
// kills the sandbox first, then the node removes it.
const Finalizer = "warren.dev/sandbox"

// FleetAdminSecret is the API key Secret that also holds the plaintext key
// (data "key") the fleet uses for calls no client made.
const FleetAdminSecret = "warren-fleet-admin"

// Data keys of an API key Secret.
const (
	KeyDataHash   = "hash"
	KeyDataTeam   = "team"
	KeyDataName   = "name"
	KeyDataPrefix = "prefix"
	KeyDataKey    = "key"
)

// AdminTeam owns a Sandbox object applied without a warren.dev/team label,
// and the fleet's admin key.
const AdminTeam = "admin"

// LeaseName is the coordination.k8s.io Lease a node renews to say it lives.
func LeaseName(node string) string { return "warren-node-" + node }

// NewScheme knows client-go's built-in types and warren.dev's.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("kubernetes scheme: %w", err)
	}
	if err := warrenv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("warren.dev scheme: %w", err)
	}
	return scheme, nil
}

// NewClient builds an uncached client from a kubeconfig file, or from the
// pod's service account when kubeconfig is empty (a DaemonSet or Deployment
// in the cluster). It does not contact the API server.
func NewClient(kubeconfig string) (client.Client, *rest.Config, error) {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	scheme, err := NewScheme()
	if err != nil {
		return nil, nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return c, cfg, nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig given and not running in a pod (%w): pass --kubeconfig or set KUBECONFIG", err)
	}
	return cfg, nil
}
