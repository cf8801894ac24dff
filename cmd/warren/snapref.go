package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/ids"
)

// snapshotRef resolves a SNAP argument to a snapshot id: a snapshot's id,
// else the name of a usable snapshot of the team ("before-refactor"). Turn
// names (turn-N) are per sandbox: sandbox, when the command names one,
// picks among them. A name that matches several is refused, listing them.
func (a *app) snapshotRef(ctx context.Context, ref, sandbox string) (string, error) {
	c := a.client()
	if ids.Validate("snapshot id", ref) == nil {
		_, err := c.Snapshots.Get(ctx, ref)
		if err == nil || client.StatusCode(err) != http.StatusNotFound {
			return ref, nil // the command's own call reports any other trouble
		}
	}
	if ids.ValidateName("snapshot name", ref) != nil {
		return ref, nil // neither an id nor a name: the server says why
	}
	snaps, err := allPages("snapshots", func(token string) ([]client.Snapshot, string, error) {
		return c.Snapshots.List(ctx, client.SnapshotListOptions{Name: ref, SandboxID: sandbox, States: []string{"ready", "archived"}, NextToken: token})
	})
	if err != nil {
		return "", err
	}
	switch len(snaps) {
	case 0:
		if sandbox != "" {
			return "", fmt.Errorf("sandbox %s has no snapshot with the id or name %q (warren snapshot ls %s lists them)", sandbox, ref, sandbox)
		}
		return "", fmt.Errorf("no snapshot has the id or name %q (warren snapshot ls lists them)", ref)
	case 1:
		return snaps[0].SnapshotID, nil
	}
	var which []string
	for _, s := range snaps {
		which = append(which, s.SnapshotID+" (sandbox "+s.SandboxID+")")
	}
	return "", fmt.Errorf("%d snapshots are named %q: %s; give the id", len(snaps), ref, strings.Join(which, ", "))
}
