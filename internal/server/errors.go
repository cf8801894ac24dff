package server

import (
	"context"
	"errors"
	"net/http"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/commands"
	"github.com/warrenhq/warren/internal/errdefs"
)

var errTooLarge = errors.New("too large")

// statusOf maps an error kind (or an agent's Connect code) to an HTTP
// status. This is the only place in warren where that happens.
func statusOf(err error) int {
	switch {
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge
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
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		switch ce.Code() {
		case connect.CodeNotFound:
			return http.StatusNotFound
		case connect.CodeAlreadyExists:
			return http.StatusConflict
		case connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodeOutOfRange:
			return http.StatusBadRequest
		case connect.CodePermissionDenied:
			return http.StatusForbidden
		case connect.CodeUnauthenticated:
			// The agent is untrusted: what it says must never read as
			// the API refusing the caller's key (a 401 makes clients
			// drop or re-ask for it). Its one honest use is a user name
			// the sandbox does not know: the request was wrong.
			return http.StatusBadRequest
		case connect.CodeResourceExhausted:
			return http.StatusTooManyRequests
		case connect.CodeUnavailable, connect.CodeUnknown, connect.CodeCanceled:
			return http.StatusBadGateway
		case connect.CodeDeadlineExceeded:
			return http.StatusGatewayTimeout
		}
	}
	return http.StatusInternalServerError
}

// messageOf is the message a user sees: an agent's own message without
// Connect's code prefix, else the error's text.
var messageOf = commands.MessageOf

func writeError(w http.ResponseWriter, r *http.Request, err error) {
	status := statusOf(err)
	if errors.Is(err, errdefs.ErrUnauthenticated) {
		// Clients (MCP ones among them) learn from it to send a bearer key.
		w.Header().Set("WWW-Authenticate", `Bearer realm="warren"`)
	}
	msg := messageOf(err)
	if sw, ok := w.(*statusWriter); ok {
		sw.errMsg = msg // for the last errors of GET /health, if it is a 5xx
	}
	writeJSON(w, status, client.Error{Code: status, Message: msg})
}
