// Package v1alpha1 holds warren's Kubernetes resources (API group warren.dev):
// Sandbox, one sandbox wherever it runs; SandboxPool, warm sandboxes kept on
// every node; and WarrenNode, what one node daemon can run and holds. The
// node daemons and the gateway read and write them; the CRDs in deploy/crds
// are generated from these types (make generate).
//
// It depends on apimachinery alone, so that a client of the fleet can import
// it without controller-runtime.
//
// +kubebuilder:object:generate=true
// +groupName=warren.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of every type here.
var GroupVersion = schema.GroupVersion{Group: "warren.dev", Version: "v1alpha1"}

var (
	// SchemeBuilder registers the types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types to a scheme (a client's, a manager's).
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&Sandbox{}, &SandboxList{},
		&SandboxPool{}, &SandboxPoolList{},
		&WarrenNode{}, &WarrenNodeList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
