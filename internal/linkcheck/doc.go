// Package linkcheck holds a test of what the warren binary links: no
// Kubernetes library (k8s.io, sigs.k8s.io) and none of warren's Kubernetes
// packages. libcontainer re-executes the warren binary as the init of every
// sandbox it starts, and every linked package's init runs before main
// there; client-go's and controller-runtime's cost about 15 ms a start
// under load. Those live in warren-fleet, the same CLI built with the kube
// tag (docs/kubernetes-binsplit.md).
package linkcheck
