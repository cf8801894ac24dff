package server

import (
	"context"
	"fmt"
	"net/http"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/devices"
	"github.com/warrenhq/warren/internal/errdefs"
)

// Devices is what the API needs of the host's devices (devices.Service).
type Devices interface {
	List(ctx context.Context) ([]devices.Listed, error)
	// Held names the devices sandbox id holds.
	Held(ctx context.Context, id string) ([]string, error)
}

// addDevices fills in the devices a sandbox holds, when they can be read.
func addDevices(r *http.Request, devs Devices, d *client.SandboxDetail) {
	if devs == nil {
		return
	}
	if held, err := devs.Held(r.Context(), d.SandboxID); err == nil {
		d.Devices = held
	}
}

// deviceRoutes serve GET /devices.
type deviceRoutes struct{ devices Devices }

// listDevices lists the devices the host offers and the sandboxes holding
// each: a create's 409 names the holder too, so a caller can see why.
func (s *deviceRoutes) listDevices(w http.ResponseWriter, r *http.Request) {
	if s.devices == nil {
		writeError(w, r, fmt.Errorf("this server gives sandboxes no devices: %w", errdefs.ErrUnsupported))
		return
	}
	list, err := s.devices.List(r.Context())
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := make([]client.Device, len(list))
	for i, d := range list {
		out[i] = client.Device{Name: d.Name, Spec: d.Spec, Shareable: d.Shareable, Hooks: d.Hooks, Trusted: d.Trusted, HeldBy: d.Holders}
		if out[i].HeldBy == nil {
			out[i].HeldBy = []string{}
		}
	}
	writeJSON(w, http.StatusOK, out)
}
