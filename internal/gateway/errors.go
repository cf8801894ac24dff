package gateway

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
)

// errNoNode marks a request no node can take because none is Ready: the
// service as a whole is unavailable (503), unlike one node that does not
// answer (502).
var errNoNode = errors.New("no node available")

// statusOf maps an error kind to the status the gateway answers, as the
// node's API does (errdefs.HTTPStatus); only this edge does it.
func statusOf(err error) int {
	if errors.Is(err, errNoNode) {
		return http.StatusServiceUnavailable
	}
	if status := errdefs.HTTPStatus(err); status != 0 {
		return status
	}
	return http.StatusInternalServerError
}

// writeError answers in the node's JSON error shape.
func writeError(w http.ResponseWriter, err error) {
	status := statusOf(err)
	if errors.Is(err, errdefs.ErrUnauthenticated) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="warren"`)
	}
	writeJSON(w, status, client.Error{Code: status, Message: err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
