package node

import (
	"maps"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/kube/fleet"
	"github.com/warrenhq/warren/internal/network"
	"github.com/warrenhq/warren/internal/session"
)

// createRequest is the create a Sandbox object's spec asks for. The team
// is the object's warren.dev/team label, else admin; the object's uid and
// name go into the sandbox's metadata, which is how the node finds the
// sandbox again (after a restart too) instead of making a second one.
func createRequest(o warrenv1.Sandbox) session.CreateRequest {
	s := o.Spec
	req := session.CreateRequest{
		Team:     o.Labels[fleet.LabelTeam],
		Template: s.Template,
		Runtime:  s.Runtime,
		Metadata: maps.Clone(s.Metadata),
	}
	if req.Team == "" {
		req.Team = fleet.AdminTeam
	}
	// A create's template may name a snapshot: the sandbox is then made
	// from it (session.Create).
	if s.FromSnapshot != "" {
		req.Template = s.FromSnapshot
	}
	if req.Metadata == nil {
		req.Metadata = map[string]string{}
	}
	req.Metadata[MetaObjectUID] = string(o.UID)
	req.Metadata[MetaObjectName] = o.Name
	if s.Timeout != nil {
		d := s.Timeout.Duration
		req.Timeout = &d
	}
	if l := s.Limits; l != nil {
		if l.Memory != nil {
			req.Limits.MemoryBytes = l.Memory.Value()
		}
		if l.CPU != nil {
			req.Limits.CPUMillis = l.CPU.MilliValue()
		}
		if l.Pids != nil {
			req.Limits.Pids = *l.Pids
		}
		if l.Disk != nil {
			req.DiskBytes = l.Disk.Value()
		}
	}
	if n := s.Network; n != nil {
		internet := n.AllowInternetAccess != nil && *n.AllowInternetAccess
		// As the API's create: a network only when something asks for one.
		if internet || n.AllowOut != nil || n.DenyOut != nil {
			req.Network = &network.Policy{AllowInternetAccess: internet, AllowOut: n.AllowOut, DenyOut: n.DenyOut}
		}
		req.PublicPorts = n.AllowPublicTraffic != nil && *n.AllowPublicTraffic
	}
	return req
}
