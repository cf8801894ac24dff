package gateway

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	wapi "github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
)

// FleetNode and FleetNodeAmount are GET /fleet/nodes's shapes (the
// client's). The list is read from the watch cache of WarrenNodes, so it
// costs no node a request; the endpoint is left out: it is the fleet's
// inside address, of no use to a caller outside it.
type (
	FleetNode       = wapi.FleetNode
	FleetNodeAmount = wapi.FleetNodeAmount
)

// serveFleetNodes answers GET /fleet/nodes for any valid key: nodes'
// capacity and use hold no team's data, and a team deciding where its
// sandboxes can go may read them as an admin does.
func (g *Gateway) serveFleetNodes(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, fmt.Errorf("%s /fleet/nodes: the node list is read-only (GET): %w", r.Method, errdefs.ErrInvalid))
		return
	}
	nodes, err := g.fleet.Nodes(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]FleetNode, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, fleetNodeOf(n))
	}
	slices.SortFunc(out, func(a, b FleetNode) int { return strings.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, out)
}

func fleetNodeOf(n Node) FleetNode {
	fn := FleetNode{Name: n.Name, Ready: n.Ready, Unschedulable: n.Unschedulable,
		Runtimes: orEmpty(n.Runtimes), Templates: orEmpty(n.Templates)}
	if n.Object != nil {
		fn.Capacity = amountOf(n.Object.Status.Capacity)
		fn.Used = amountOf(n.Object.Status.Used)
	}
	fn.Used.Sandboxes = n.Sandboxes
	return fn
}

func amountOf(r warrenv1.NodeResources) FleetNodeAmount {
	value := func(q *resource.Quantity) int64 {
		if q == nil {
			return 0
		}
		return q.Value()
	}
	a := FleetNodeAmount{MemoryBytes: value(r.Memory), DiskBytes: value(r.Disk), Sandboxes: r.Sandboxes}
	if r.CPU != nil {
		a.MilliCPU = r.CPU.MilliValue()
	}
	return a
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
