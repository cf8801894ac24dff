package bench

import (
	"log/slog"
	"time"
)

// EnvtestVersion is the Kubernetes version `make envtest` builds
// (ENVTEST_K8S_VERSION in the Makefile): the fleet suite's control plane is
// looked for in <cache-dir>/envtest/k8s-<it> unless KUBEBUILDER_ASSETS
// names another.
const EnvtestVersion = "1.36.3"

// FleetOptions size the fleet suite.
type FleetOptions struct {
	// Binary is this warren binary: the nodes and the gateway run it.
	Binary string
	// CacheDir holds envtest's control plane (envtest/k8s-<version>) and
	// is the nodes' --cache-dir.
	CacheDir  string
	Namespace string
	Nodes     int
	// Creates are the creates timed through the gateway and as many
	// directly on a node; Execs the execs of `true` and the GETs of each.
	Creates int
	Execs   int
	// Lease is the nodes' --lease-duration; LostSandboxes the sandboxes on
	// the node killed for the node-loss item.
	Lease         time.Duration
	LostSandboxes int
	Log           *slog.Logger
}

// FleetReport is the fleet suite's report: what the gateway adds to a call
// over the same call made on the node directly, measured in one run on one
// fleet, and how soon a node's loss shows on its sandboxes.
type FleetReport struct {
	Machine string `json:"machine"`
	Nodes   int    `json:"nodes"`
	// Create: POST /sandboxes of bb (the delete after it untimed).
	Create FleetPair `json:"create"`
	// ExecTrue: POST /sandboxes/{id}/exec?wait=true of `true`.
	ExecTrue FleetPair `json:"exec_true"`
	// ExecTrueEnvd: `true` run the E2B SDK's way, a Connect server stream
	// (POST /process.Process/Start on the sandbox plane) read to its end.
	ExecTrueEnvd FleetPair `json:"exec_true_envd"`
	// GetSandbox: GET /sandboxes/{id}, routed by the gateway to the owner.
	GetSandbox FleetPair `json:"get_sandbox"`
	NodeLoss   NodeLoss  `json:"node_loss"`
	// Controller says where the node-loss controller ran.
	Controller string       `json:"controller"`
	Targets    FleetTargets `json:"targets"`
}

// FleetPair is one call through the gateway and directly on the node that
// holds (or makes) the sandbox, timed alternately.
type FleetPair struct {
	Gateway Stats `json:"gateway"`
	Direct  Stats `json:"direct"`
	// Added is gateway − direct; Ratio gateway / direct.
	AddedP50 float64 `json:"added_p50_ms"`
	AddedP99 float64 `json:"added_p99_ms"`
	RatioP50 float64 `json:"ratio_p50"`
	RatioP99 float64 `json:"ratio_p99"`
}

// NodeLoss is the node-loss item: one node daemon killed with SIGKILL
// while holding sandboxes.
type NodeLoss struct {
	LeaseSeconds float64 `json:"lease_s"`
	Sandboxes    int     `json:"sandboxes"`
	// AfterExpiry: from the Lease's expiry (renewTime + duration) to each
	// Sandbox object reading phase Lost; AfterKill: from the kill.
	AfterExpiry Stats `json:"lost_after_expiry"`
	AfterKill   Stats `json:"lost_after_kill"`
}

// FleetTargets restates the goals.
type FleetTargets struct {
	CreateAddedP50Ms float64 `json:"create_added_p50_ms"`
	ExecAddedP50Ms   float64 `json:"exec_added_p50_ms"`
	LostAfterKillMs  float64 `json:"lost_after_kill_ms"`
}
