//go:build !kube

package bench

import (
	"context"
	"errors"
)

// ErrNoKube is RunFleet's answer in the warren binary, which links no
// Kubernetes library (every sandbox start re-executes it, and their inits
// would run first): the fleet suite runs in warren-fleet, where the CLI
// sends it.
var ErrNoKube = errors.New("the fleet suite is in warren-fleet (this binary links no Kubernetes library)")

// RunFleet refuses: see ErrNoKube.
func RunFleet(context.Context, FleetOptions) (*FleetReport, error) {
	return nil, ErrNoKube
}
