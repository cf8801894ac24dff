package devices

import (
	"context"
	"fmt"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/store"
)

// ClaimStore keeps which sandbox holds which device (internal/store).
type ClaimStore interface {
	ClaimDevices(ctx context.Context, id string, claims []store.DeviceClaim) error
	ReleaseDevices(ctx context.Context, id string) error
	DeviceClaims(ctx context.Context, id string) ([]store.DeviceClaim, error)
}

// Service gives sandboxes devices: it checks a create's names, records
// the claims (which survive restarts and follow the sandbox through stop
// and pause until its delete) and hands every start the edits.
type Service struct {
	reg    *Registry
	claims ClaimStore
}

// NewService makes a Service of the host's specs and the claims' store.
func NewService(reg *Registry, claims ClaimStore) *Service {
	return &Service{reg: reg, claims: claims}
}

// Listed is one device of the host with the sandboxes holding it.
type Listed struct {
	Device
	Holders []string
}

// Claim gives sandbox id the named devices, all or none. classes are the
// device classes its runtime can pass through (nil: any). Unknown or
// malformed names, untrusted hooks and classes the runtime cannot pass
// are ErrInvalid; a device another sandbox holds is ErrConflict naming it.
func (s *Service) Claim(ctx context.Context, id string, names, classes []string) error {
	if len(names) == 0 {
		return nil
	}
	devs, err := s.reg.Resolve(names)
	if err != nil {
		return err
	}
	claims := make([]store.DeviceClaim, 0, len(devs))
	for _, d := range devs {
		if classes != nil && !slices.Contains(classes, Class(d.Name)) {
			return fmt.Errorf("device %s: this sandbox's runtime passes through only %s devices; use the native runtime for others: %w",
				d.Name, strings.Join(classes, ", "), errdefs.ErrInvalid)
		}
		claims = append(claims, store.DeviceClaim{Device: d.Name, SandboxID: id, Exclusive: !d.Shareable})
	}
	return s.claims.ClaimDevices(ctx, id, claims)
}

// Release drops sandbox id's claims (at its delete).
func (s *Service) Release(ctx context.Context, id string) error {
	return s.claims.ReleaseDevices(ctx, id)
}

// Held returns the names of the devices sandbox id holds.
func (s *Service) Held(ctx context.Context, id string) ([]string, error) {
	claims, err := s.claims.DeviceClaims(ctx, id)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(claims))
	for i, c := range claims {
		names[i] = c.Device
	}
	return names, nil
}

// EditsOf is what a start of sandbox id adds to its runtime spec: nil if
// it holds no device. Asked at every start, so a restart, a wake or a
// rollback gets the same devices as the create.
func (s *Service) EditsOf(ctx context.Context, id string) (*runtime.Devices, error) {
	names, err := s.Held(ctx, id)
	if err != nil || len(names) == 0 {
		return nil, err
	}
	return &runtime.Devices{Names: names, Apply: func(oci *specs.Spec) error { return s.reg.Apply(oci, names) }}, nil
}

// List is what the host offers and who holds what. A claimed device whose
// spec is gone is listed too (with no spec), so its holder stays visible.
func (s *Service) List(ctx context.Context) ([]Listed, error) {
	claims, err := s.claims.DeviceClaims(ctx, "")
	if err != nil {
		return nil, err
	}
	holders := map[string][]string{}
	for _, c := range claims {
		holders[c.Device] = append(holders[c.Device], c.SandboxID)
	}
	var out []Listed
	for _, d := range s.reg.Devices() {
		out = append(out, Listed{Device: d, Holders: holders[d.Name]})
		delete(holders, d.Name)
	}
	for name, h := range holders {
		out = append(out, Listed{Device: Device{Name: name}, Holders: h})
	}
	slices.SortFunc(out, func(a, b Listed) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Free names the devices a new sandbox could be given now: those the
// host offers that are shareable or held by no sandbox (what a fleet node
// publishes for placement).
func (s *Service) Free(ctx context.Context) ([]string, error) {
	list, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range list {
		if d.Spec != "" && (d.Shareable || len(d.Holders) == 0) {
			out = append(out, d.Name)
		}
	}
	return out, nil
}
