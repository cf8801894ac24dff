package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SandboxPool keeps warm sandboxes of one template on every node it selects
// (warren's warm pool, --pool TEMPLATE=MIN:MAX:TTL, fleet-wide): a create of
// the template on such a node claims one instead of starting a sandbox.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=sbxpool,categories=warren
// +kubebuilder:printcolumn:name="Template",type=string,JSONPath=`.spec.template`
// +kubebuilder:printcolumn:name="Min",type=integer,JSONPath=`.spec.minPerNode`
// +kubebuilder:printcolumn:name="Max",type=integer,JSONPath=`.spec.maxPerNode`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Runtime",type=string,JSONPath=`.spec.runtime`,priority=1
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodeCount`,priority=1
// +kubebuilder:selectablefield:JSONPath=`.spec.template`
type SandboxPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec SandboxPoolSpec `json:"spec,omitempty"`
	// +optional
	Status SandboxPoolStatus `json:"status,omitempty"`
}

// SandboxPoolSpec is the pool asked for, per node.
//
// +kubebuilder:validation:XValidation:rule="!has(self.maxPerNode) || self.maxPerNode == 0 || self.maxPerNode >= self.minPerNode",message="maxPerNode must be at least minPerNode (or 0: the same as minPerNode)"
type SandboxPoolSpec struct {
	// Template of the pooled sandboxes.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9._-]*$`
	Template string `json:"template"`

	// Runtime of the pooled sandboxes. Empty: the node's default.
	// +optional
	// +kubebuilder:validation:Enum=native;gvisor
	Runtime string `json:"runtime,omitempty"`

	// MinPerNode ready sandboxes are kept on each selected node.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	MinPerNode int32 `json:"minPerNode"`

	// MaxPerNode caps how many pooled sandboxes a node holds at once,
	// claimed ones being replaced included (0 or omitted: minPerNode).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	MaxPerNode int32 `json:"maxPerNode,omitempty"`

	// TTL replaces a ready sandbox that waited this long for a claim (a
	// Go duration of at least 10s; 0 or omitted: never).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	// +kubebuilder:validation:XValidation:rule="duration(self) == duration('0s') || duration(self) >= duration('10s')",message="ttl must be 0 or at least 10s: every replacement is a sandbox start"
	TTL *metav1.Duration `json:"ttl,omitempty"`

	// Network pools sandboxes with a network and nothing open: only creates
	// that ask for a network claim them, and get their policy applied.
	// +optional
	Network bool `json:"network,omitempty"`

	// NodeSelector picks the WarrenNodes (by their labels) that keep the
	// pool. Omitted: every node.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
}

// SandboxPoolStatus is the pool's state across the fleet.
type SandboxPoolStatus struct {
	// Ready sandboxes of the pool, all nodes together.
	// +optional
	Ready int32 `json:"ready,omitempty"`

	// NodeCount is the number of nodes keeping the pool.
	// +optional
	NodeCount int32 `json:"nodeCount,omitempty"`

	// Nodes is the pool on each node that keeps it.
	// +optional
	// +listType=map
	// +listMapKey=node
	Nodes []SandboxPoolNodeStatus `json:"nodes,omitempty"`

	// ObservedGeneration is the spec generation the pool's controller last
	// acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions of the pool (e.g. Ready: every selected node holds its
	// minimum).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SandboxPoolNodeStatus is one node's share of a pool (warren's GET /pools).
type SandboxPoolNodeStatus struct {
	// Node keeping this share.
	Node string `json:"node"`
	// Ready sandboxes waiting for a claim.
	Ready int32 `json:"ready"`
	// Hits are creates served from the pool, Misses creates of the template
	// that found it empty.
	// +optional
	Hits int64 `json:"hits,omitempty"`
	// +optional
	Misses int64 `json:"misses,omitempty"`
	// LastFailure is the latest error refilling the pool, if any.
	// +optional
	LastFailure string `json:"lastFailure,omitempty"`
}

// SandboxPoolList is a list of SandboxPools.
//
// +kubebuilder:object:root=true
type SandboxPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxPool `json:"items"`
}
