package client

import (
	"context"
	"net/http"
)

// FleetNode is one node of a fleet gateway's GET /fleet/nodes: its state
// and its capacity and use. A single daemon has no such route (404).
type FleetNode struct {
	Name          string          `json:"name"`
	Ready         bool            `json:"ready"`
	Unschedulable bool            `json:"unschedulable"`
	Runtimes      []string        `json:"runtimes"`
	Templates     []string        `json:"templates"`
	Capacity      FleetNodeAmount `json:"capacity"`
	Used          FleetNodeAmount `json:"used"`
}

// FleetNodeAmount is a node's capacity or use, in bytes and millicores;
// 0 where the node did not say.
type FleetNodeAmount struct {
	MemoryBytes int64 `json:"memoryBytes"`
	MilliCPU    int64 `json:"milliCPU"`
	DiskBytes   int64 `json:"diskBytes"`
	Sandboxes   int32 `json:"sandboxes"`
}

// FleetNodes lists a fleet gateway's nodes by name (any valid key).
func (s *MetaService) FleetNodes(ctx context.Context) ([]FleetNode, error) {
	var out []FleetNode
	err := s.t.call(ctx, request{method: http.MethodGet, path: "/fleet/nodes"}, &out)
	return out, err
}
