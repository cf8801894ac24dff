package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
)

// The sandbox plane's refusals take the shapes the node gives them
// (internal/server's sandboxGone and planeError), since E2B's SDKs read
// them: a sandbox that is not there is E2B's proxy's 502 "The sandbox was
// not found" (or a Connect unavailable for RPCs), which the SDKs turn into
// "the sandbox was killed or timed out".

var connectErrors = connect.NewErrorWriter()

// writePlaneError answers a sandbox-plane request for sandbox id that the
// gateway could not route.
func writePlaneError(w http.ResponseWriter, r *http.Request, id string, err error) {
	if errdefs.IsNotFound(err) {
		if isConnectRequest(r) && connectErrors.IsSupported(r) {
			_ = connectErrors.Write(w, r, connect.NewError(connect.CodeUnavailable, fmt.Errorf("sandbox %s not found: it was killed or timed out", id)))
			return
		}
		writeJSON(w, http.StatusBadGateway, client.SandboxGone(id))
		return
	}
	if isConnectRequest(r) && connectErrors.IsSupported(r) {
		code := connect.CodeInternal
		if errdefs.IsUnavailable(err) || errors.Is(err, errNoNode) {
			code = connect.CodeUnavailable
		}
		_ = connectErrors.Write(w, r, connect.NewError(code, err))
		return
	}
	writeError(w, err)
}

func isConnectRequest(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/process.Process/") || strings.HasPrefix(r.URL.Path, "/filesystem.Filesystem/")
}
