package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types of a WarrenNode.
const (
	// NodeReady is True while the node daemon serves and renews its lease.
	NodeReady = "Ready"
)

// WarrenNode is one node daemon of the fleet (warren serve --cluster
// kubernetes), named after the Kubernetes node it runs on: what it can run
// and what it holds, which placement reads. The daemon writes its status;
// its liveness is its coordination.k8s.io Lease, not this object.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=wn,categories=warren
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Sandboxes",type=integer,JSONPath=`.status.used.sandboxes`
// +kubebuilder:printcolumn:name="Max",type=integer,JSONPath=`.status.capacity.sandboxes`
// +kubebuilder:printcolumn:name="Snapshots",type=integer,JSONPath=`.status.snapshots.count`
// +kubebuilder:printcolumn:name="Heartbeat",type=date,JSONPath=`.status.lastHeartbeat`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoint`,priority=1
// +kubebuilder:printcolumn:name="Runtimes",type=string,JSONPath=`.status.runtimes`,priority=1
// +kubebuilder:printcolumn:name="Memory",type=string,JSONPath=`.status.used.memory`,priority=1
// +kubebuilder:printcolumn:name="Unschedulable",type=boolean,JSONPath=`.spec.unschedulable`,priority=1
type WarrenNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec WarrenNodeSpec `json:"spec,omitempty"`
	// +optional
	Status WarrenNodeStatus `json:"status,omitempty"`
}

// WarrenNodeSpec is what the operator asks of a node.
type WarrenNodeSpec struct {
	// Unschedulable keeps placement from putting new sandboxes on the node
	// (a drain sets it); the sandboxes it runs stay.
	// +optional
	Unschedulable bool `json:"unschedulable,omitempty"`
}

// WarrenNodeStatus is what the node daemon reports of itself.
type WarrenNodeStatus struct {
	// Endpoint is the base URL of the node's API (what the gateway calls).
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// Version of the warren daemon.
	// +optional
	Version string `json:"version,omitempty"`

	// Capacity is what the node may give its sandboxes: memory, CPU and
	// disk, and the most sandboxes alive at once.
	// +optional
	Capacity NodeResources `json:"capacity,omitempty"`

	// Used is what its sandboxes take of it now.
	// +optional
	Used NodeResources `json:"used,omitempty"`

	// Runtimes the node can run (native, gvisor).
	// +optional
	// +listType=set
	Runtimes []string `json:"runtimes,omitempty"`

	// Templates built on the node (a sandbox of one starts without a
	// build).
	// +optional
	// +listType=set
	Templates []string `json:"templates,omitempty"`

	// Devices a new sandbox can be given on the node now (CDI names,
	// offered by its specs and not held exclusively): placement puts a
	// create asking for devices on a node that has them all.
	// +optional
	// +listType=set
	Devices []string `json:"devices,omitempty"`

	// Snapshots the node holds, summarised (placement prefers the node
	// that holds a fork's snapshot; the Sandbox objects say which).
	// +optional
	Snapshots SnapshotSummary `json:"snapshots,omitempty"`

	// LastHeartbeat is when the daemon last wrote this status.
	// +optional
	LastHeartbeat *metav1.Time `json:"lastHeartbeat,omitempty"`

	// Conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodeResources is an amount of each resource placement weighs.
type NodeResources struct {
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`
	// +optional
	Disk *resource.Quantity `json:"disk,omitempty"`
	// Sandboxes alive (in use), or the most the node runs at once
	// (capacity).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Sandboxes int32 `json:"sandboxes,omitempty"`
}

// SnapshotSummary counts a node's snapshots.
type SnapshotSummary struct {
	// Count of snapshots held.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Count int64 `json:"count,omitempty"`
	// Bytes they take on disk (shared extents counted once, when the
	// storage can tell).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Bytes int64 `json:"bytes,omitempty"`
}

// WarrenNodeList is a list of WarrenNodes.
//
// +kubebuilder:object:root=true
type WarrenNodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WarrenNode `json:"items"`
}
