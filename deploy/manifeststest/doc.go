// Package manifeststest holds the tests of warren's Kubernetes manifests:
// the kustomize base (deploy/kustomize/base) and the Helm chart
// (deploy/helm/warren) are rendered with kustomize's and Helm's own Go
// libraries and applied with server-side dry run to a real kube-apiserver
// (internal/kube/kubetest), their RBAC is checked for least privilege, and
// the two are checked to make the same objects.
//
// It is a module of its own because Helm's library needs newer k8s.io
// modules than the main module's; the main module is replaced by the
// checkout it sits in.
package manifeststest
