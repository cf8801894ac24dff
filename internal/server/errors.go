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
// status: the kinds as errdefs.HTTPStatus does (the fleet's gateway
// answers alike), and the server's own cases.
func statusOf(err error) int {
	if errors.Is(err, errTooLarge) {
		return http.StatusRequestEntityTooLarge
	}
	if status := errdefs.HTTPStatus(err); status != 0 {
		return status
	}
	if errors.Is(err, context.DeadlineExceeded) {
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
