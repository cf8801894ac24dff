package placement

import (
	"fmt"
	"slices"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Reason is why the filter removed a node.
type Reason string

// The filter's reasons, in the order it checks them: a node is counted
// under the first one it fails.
const (
	NotReady           Reason = "not ready"
	LeaseExpired       Reason = "no live lease"
	Unschedulable      Reason = "unschedulable"
	RuntimeUnsupported Reason = "runtime not supported"
	TemplateMissing    Reason = "template not built"
	NoMemory           Reason = "not enough memory"
	NoCPU              Reason = "fewer CPUs than asked"
	NoDisk             Reason = "not enough disk"
	SandboxesFull      Reason = "at its sandbox limit"
	NoDevices          Reason = "devices not free there"
)

// reasonOrder lists the reasons as the filter checks them (how an error
// lists them too).
var reasonOrder = []Reason{NotReady, LeaseExpired, Unschedulable, RuntimeUnsupported, TemplateMissing,
	NoMemory, NoCPU, NoDisk, SandboxesFull, NoDevices}

// capacityReason says whether r only means "full now": such a node may
// take the sandbox once others end.
func capacityReason(r Reason) bool {
	return r == NoMemory || r == NoDisk || r == SandboxesFull || r == NoDevices
}

// check returns why n cannot take req, as 1 + its index in reasonOrder (a
// counter array's index: cheaper than a map per filtered node), or 0 when
// it can.
func check(n *Node, req *Request) int {
	switch {
	case !n.Ready:
		return 1
	case !n.LeaseLive:
		return 2
	case n.Unschedulable:
		return 3
	case req.Runtime != "" && !slices.Contains(n.Runtimes, req.Runtime):
		return 4
	case req.Template != "" && !slices.Contains(n.Templates, req.Template):
		return 5
	case !fits(n.Capacity.MemoryBytes, n.Used.MemoryBytes, req.MemoryBytes):
		return 6
	case n.Capacity.MilliCPU > 0 && req.MilliCPU > n.Capacity.MilliCPU:
		// CPU is compressible: limits are overcommitted (an idle sandbox
		// uses next to none), so what the node's sandboxes reserve only
		// scores; a sandbox asking more than the whole node cannot go.
		return 7
	case !fits(n.Capacity.DiskBytes, n.Used.DiskBytes, req.DiskBytes):
		return 8
	case !fits(n.Capacity.Sandboxes, n.Used.Sandboxes, 1):
		return 9
	case !hasAll(n.Devices, req.Devices):
		return 10
	}
	return 0
}

// hasAll says whether every one of want is in have.
func hasAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// counts are the nodes each reason filtered, indexed as check returns.
type counts [11]int

// reasons turns counts into the map decisions and errors carry.
func (c *counts) reasons() map[Reason]int {
	out := map[Reason]int{}
	for i, r := range reasonOrder {
		if c[i+1] > 0 {
			out[r] = c[i+1]
		}
	}
	return out
}

// fits says whether asked more fits; an unreported capacity (0) always does.
func fits(capacity, used, asked int64) bool {
	return capacity <= 0 || used+asked <= capacity
}

// NoNodeError is a placement that found no node: how many each reason
// removed. It is errdefs.ErrResourceExhausted when some node failed only
// for room (waiting may help), else errdefs.ErrUnavailable.
type NoNodeError struct {
	Nodes    int
	Filtered map[Reason]int
	Request  Request
}

func (e *NoNodeError) Error() string {
	if e.Nodes == 0 {
		return "no node can take the sandbox: the fleet has no nodes"
	}
	return fmt.Sprintf("no node can take the sandbox (%s); of its %d nodes: %s", describe(e.Request), e.Nodes, formatFiltered(e.Filtered))
}

// Unwrap gives the error's kind.
func (e *NoNodeError) Unwrap() error {
	for r, n := range e.Filtered {
		if n > 0 && capacityReason(r) {
			return errdefs.ErrResourceExhausted
		}
	}
	return errdefs.ErrUnavailable
}

// describe names what a request asks, for messages.
func describe(req Request) string {
	var parts []string
	add := func(name, v string) {
		if v != "" {
			parts = append(parts, name+" "+v)
		}
	}
	add("template", req.Template)
	add("runtime", req.Runtime)
	add("snapshot", req.Snapshot)
	if req.MemoryBytes > 0 {
		add("memory", fmt.Sprintf("%dMiB", req.MemoryBytes>>20))
	}
	if req.MilliCPU > 0 {
		add("cpu", fmt.Sprintf("%dm", req.MilliCPU))
	}
	if req.DiskBytes > 0 {
		add("disk", fmt.Sprintf("%dMiB", req.DiskBytes>>20))
	}
	if len(parts) == 0 {
		return "defaults"
	}
	return strings.Join(parts, ", ")
}

// formatFiltered lists the reasons' counts in the filter's order:
// "2 not ready, 1 runtime not supported".
func formatFiltered(filtered map[Reason]int) string {
	var parts []string
	for _, r := range reasonOrder {
		if n := filtered[r]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, r))
		}
	}
	return strings.Join(parts, ", ")
}

func sumFiltered(filtered map[Reason]int) int {
	n := 0
	for _, c := range filtered {
		n += c
	}
	return n
}
