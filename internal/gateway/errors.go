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
// node's API does (internal/server); only this edge does it.
func statusOf(err error) int {
	switch {
	case errors.Is(err, errNoNode):
		return http.StatusServiceUnavailable
	case errdefs.IsNotFound(err):
		return http.StatusNotFound
	case errdefs.IsAlreadyExists(err), errdefs.IsConflict(err):
		return http.StatusConflict
	case errdefs.IsInvalid(err):
		return http.StatusBadRequest
	case errors.Is(err, errdefs.ErrUnauthenticated):
		return http.StatusUnauthorized
	case errors.Is(err, errdefs.ErrPermissionDenied):
		return http.StatusForbidden
	case errdefs.IsResourceExhausted(err):
		return http.StatusTooManyRequests
	case errdefs.IsUnsupported(err):
		return http.StatusNotImplemented
	case errdefs.IsUnavailable(err):
		return http.StatusBadGateway
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
