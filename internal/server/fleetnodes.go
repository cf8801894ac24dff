package server

import (
	"fmt"
	"net/http"

	"github.com/warrenhq/warren/internal/errdefs"
)

// noFleetNodes answers GET /fleet/nodes on a single daemon: the node list
// is a fleet gateway's (internal/gateway), and a daemon is no fleet. The
// route is here so that the answer says so rather than "no route".
func noFleetNodes(w http.ResponseWriter, r *http.Request) {
	writeError(w, r, fmt.Errorf("this is a single warren daemon, not a fleet's gateway: it has no nodes to list: %w", errdefs.ErrNotFound))
}
