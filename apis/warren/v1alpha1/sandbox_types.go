package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The runtimes a sandbox may ask for (warren serve --runtime).
const (
	// RuntimeNative runs the sandbox in namespaces under libcontainer.
	RuntimeNative = "native"
	// RuntimeGVisor runs it on gVisor's kernel: stronger isolation, and
	// memory snapshots.
	RuntimeGVisor = "gvisor"
)

// SandboxPhase is where a sandbox is in its lifecycle: warren's own states
// (internal/session/state.go), capitalised, plus Pending before a node took
// it and Lost when the node holding it stopped answering.
//
// +kubebuilder:validation:Enum=Pending;Creating;Running;Paused;Hibernated;Stopped;Failed;Destroyed;Lost
type SandboxPhase string

const (
	// SandboxPending: no node has taken the sandbox yet (unplaced, or
	// placed and not yet seen by its node).
	SandboxPending SandboxPhase = "Pending"
	// SandboxCreating: its node is making it.
	SandboxCreating SandboxPhase = "Creating"
	// SandboxRunning: it runs and serves.
	SandboxRunning SandboxPhase = "Running"
	// SandboxPaused: its processes are frozen in memory.
	SandboxPaused SandboxPhase = "Paused"
	// SandboxHibernated: its processes were saved to disk and ended.
	SandboxHibernated SandboxPhase = "Hibernated"
	// SandboxStopped: it ended; its files are kept.
	SandboxStopped SandboxPhase = "Stopped"
	// SandboxFailed: it broke; the Ready condition says why.
	SandboxFailed SandboxPhase = "Failed"
	// SandboxDestroyed: its node removed it; only the object is left.
	SandboxDestroyed SandboxPhase = "Destroyed"
	// SandboxLost: its node's lease lapsed. Status.LastSnapshot names what
	// another node can restore it from.
	SandboxLost SandboxPhase = "Lost"
)

// Condition types of a Sandbox.
const (
	// SandboxReady is True while the sandbox runs and serves; its reason
	// and message say why not otherwise (a failure's cause among them).
	SandboxReady = "Ready"
	// SandboxPlaced is True once a node was chosen (spec.nodeName set).
	SandboxPlaced = "Placed"
)

// Sandbox is one warren sandbox in the fleet. A node daemon writes one for
// every sandbox it runs (its SQLite stays the truth; the object is what the
// fleet sees) and makes one for every object assigned to it that it does not
// run yet, so that `kubectl apply` of a Sandbox works too.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=sbx,categories=warren
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.node`
// +kubebuilder:printcolumn:name="Template",type=string,JSONPath=`.spec.template`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="SandboxID",type=string,JSONPath=`.status.sandboxID`,priority=1
// +kubebuilder:printcolumn:name="Runtime",type=string,JSONPath=`.status.runtime`,priority=1
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoint`,priority=1
// +kubebuilder:selectablefield:JSONPath=`.spec.nodeName`
// +kubebuilder:selectablefield:JSONPath=`.status.node`
// +kubebuilder:selectablefield:JSONPath=`.status.phase`
// +kubebuilder:selectablefield:JSONPath=`.status.sandboxID`
type Sandbox struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec SandboxSpec `json:"spec,omitempty"`
	// +optional
	Status SandboxStatus `json:"status,omitempty"`
}

// SandboxSpec is the sandbox asked for: the fields of warren's create
// (POST /sandboxes) that make sense in an object, and where it runs.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.template) && has(self.fromSnapshot))",message="template and fromSnapshot exclude each other: a sandbox made from a snapshot starts from that snapshot's files"
type SandboxSpec struct {
	// Template the sandbox starts from. Empty: the node's default
	// template (base), unless fromSnapshot is set.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9._-]*$`
	Template string `json:"template,omitempty"`

	// FromSnapshot makes the sandbox from one of warren's snapshots (its
	// id) instead of a template: a fork of the sandbox it was taken from.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]+$`
	FromSnapshot string `json:"fromSnapshot,omitempty"`

	// Runtime runs the sandbox: native (namespaces) or gvisor (gVisor's
	// kernel). Empty: the node's default; a sandbox made from a snapshot
	// keeps the runtime of the one it was taken from.
	// +optional
	// +kubebuilder:validation:Enum=native;gvisor
	Runtime string `json:"runtime,omitempty"`

	// Limits caps the sandbox's resources; an omitted one is the node's
	// default.
	// +optional
	Limits *SandboxLimits `json:"limits,omitempty"`

	// Timeout is how long the sandbox may run before it is stopped (a Go
	// duration: 300s, 1h). Omitted: 5 minutes; 0: never.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// Network gives the sandbox a network and its egress policy. Omitted:
	// no network (loopback only).
	// +optional
	Network *SandboxNetwork `json:"network,omitempty"`

	// Metadata is warren's metadata of the sandbox (E2B's): free-form
	// key/value pairs the API lists and filters sandboxes by.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Metadata map[string]string `json:"metadata,omitempty"`

	// NodeName is the WarrenNode that runs the sandbox: set by placement
	// (the gateway, or whoever writes the object); empty: not placed yet.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	NodeName string `json:"nodeName,omitempty"`
}

// SandboxLimits caps a sandbox's resources (warren's limits: memoryMB,
// cpuCount, diskMB, pids), in Kubernetes quantities.
type SandboxLimits struct {
	// Memory the sandbox may use (512Mi, 2Gi).
	// +optional
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('0'))",message="memory must not be negative"
	Memory *resource.Quantity `json:"memory,omitempty"`

	// CPU the sandbox may use, in CPUs (500m is half of one).
	// +optional
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('0'))",message="cpu must not be negative"
	CPU *resource.Quantity `json:"cpu,omitempty"`

	// Disk caps the space the sandbox may write, its snapshots included.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('0'))",message="disk must not be negative"
	Disk *resource.Quantity `json:"disk,omitempty"`

	// Pids caps the processes and threads the sandbox may hold.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Pids *int64 `json:"pids,omitempty"`
}

// SandboxNetwork is a sandbox's network: its egress policy (warren's
// allowInternetAccess, allowOut, denyOut) and whether its ports are public.
type SandboxNetwork struct {
	// AllowInternetAccess makes egress default-allow; false or omitted,
	// only allowOut is reachable.
	// +optional
	AllowInternetAccess *bool `json:"allowInternetAccess,omitempty"`

	// AllowOut lists what the sandbox may reach: IPv4 addresses, CIDR
	// blocks, domain names or *.wildcard names.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=253
	AllowOut []string `json:"allowOut,omitempty"`

	// DenyOut lists what it may not reach, in the same forms; deny wins
	// over allow, and 0.0.0.0/0 means nothing but allowOut.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=253
	DenyOut []string `json:"denyOut,omitempty"`

	// AllowPublicTraffic lets the sandbox's ports take requests without
	// its traffic token or an API key.
	// +optional
	AllowPublicTraffic *bool `json:"allowPublicTraffic,omitempty"`
}

// SandboxStatus is what the sandbox's node reports of it.
type SandboxStatus struct {
	// Phase is where the sandbox is in its lifecycle.
	// +optional
	Phase SandboxPhase `json:"phase,omitempty"`

	// Node runs the sandbox (it reports this status).
	// +optional
	Node string `json:"node,omitempty"`

	// SandboxID is warren's id of the sandbox, the one its APIs and the E2B
	// SDK take.
	// +optional
	SandboxID string `json:"sandboxID,omitempty"`

	// Runtime it runs on: spec.runtime, or the node's default.
	// +optional
	Runtime string `json:"runtime,omitempty"`

	// Endpoint is the base URL of the node's API that serves the sandbox.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// LastSnapshot is the newest snapshot of the sandbox another node can
	// restore it from (a Lost sandbox is restored from it).
	// +optional
	LastSnapshot string `json:"lastSnapshot,omitempty"`

	// Replica is the copy of the sandbox another node holds, made by the
	// gateway's controller while the sandbox was paused or hibernated: a
	// Lost sandbox is restored from it on that node (on connect).
	// +optional
	Replica *SandboxReplica `json:"replica,omitempty"`

	// StartedAt is when the sandbox started on its node.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`

	// ObservedGeneration is the spec generation the node last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Placed, Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SandboxReplica is a copy of a sandbox's files (and its record) on a node
// other than its own, taken while it was at rest.
type SandboxReplica struct {
	// Node holds the copy.
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node"`

	// Snapshot is the id of the copied snapshot, the same on both nodes.
	// +kubebuilder:validation:MaxLength=63
	Snapshot string `json:"snapshot"`

	// At is when the copy was complete: anything the sandbox did after it
	// is not in the copy.
	At metav1.MicroTime `json:"at"`
}

// SandboxList is a list of Sandboxes.
//
// +kubebuilder:object:root=true
type SandboxList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Sandbox `json:"items"`
}
