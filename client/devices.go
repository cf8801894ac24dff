package client

import (
	"context"
	"net/http"
)

// Device is one host device (a CDI name) as GET /devices lists it.
type Device struct {
	Name string `json:"name"`
	// Spec is the CDI spec file that defines it ("" for a device still
	// held whose spec is gone).
	Spec string `json:"spec,omitempty"`
	// Shareable devices may be held by several sandboxes at once; the
	// others by one.
	Shareable bool `json:"shareable"`
	// Hooks: its edits run host programs; Trusted: its spec's directory
	// may run them (untrusted ones are refused at create).
	Hooks   bool `json:"hooks,omitempty"`
	Trusted bool `json:"trusted,omitempty"`
	// HeldBy are the sandboxes holding it.
	HeldBy []string `json:"heldBy"`
}

// Devices lists the devices the host offers to sandboxes (CDI specs under
// the daemon's --cdi-spec-dirs) and which sandboxes hold them.
func (s *MetaService) Devices(ctx context.Context) ([]Device, error) {
	var out []Device
	err := s.t.call(ctx, request{method: http.MethodGet, path: "/devices"}, &out)
	return out, err
}
