package node

import (
	"context"
	"fmt"
	"strings"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/errdefs"
)

// CheckPeer admits endpoint as a peer to send the fleet's admin key to: it
// must be the advertised endpoint of one of the fleet's WarrenNodes. A pull
// that named any other URL would hand the key to whoever serves it.
func (n *Node) CheckPeer(ctx context.Context, endpoint string) error {
	var nodes warrenv1.WarrenNodeList
	if err := n.cfg.Client.List(ctx, &nodes); err != nil {
		return fmt.Errorf("list the fleet's WarrenNodes: %v: %w", err, errdefs.ErrUnavailable)
	}
	want := strings.TrimRight(endpoint, "/")
	for _, wn := range nodes.Items {
		if e := strings.TrimRight(wn.Status.Endpoint, "/"); e != "" && e == want {
			return nil
		}
	}
	return fmt.Errorf("from %q is no WarrenNode's endpoint: a pull sends the fleet's key only to the fleet's own nodes: %w", endpoint, errdefs.ErrPermissionDenied)
}
