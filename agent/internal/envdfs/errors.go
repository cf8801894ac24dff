package envdfs

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"syscall"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/agent/internal/fsops"
)

// fsErrors is envd's mapping on top of the shared one: a read-only file
// system is a permission problem, and a busy target or a symlink loop is the
// caller's to fix.
var fsErrors = fsops.Errors{
	{Errno: syscall.EROFS, Code: connect.CodePermissionDenied},
	{Errno: syscall.EBUSY, Code: connect.CodeFailedPrecondition},
	{Errno: syscall.ELOOP, Code: connect.CodeFailedPrecondition, Hint: "cyclic symlink or too many levels of symlinks"},
}

// fsError turns a filesystem error into a Connect error whose code the SDKs
// act on (not_found becomes their FileNotFoundError) and whose message names
// the path once. A *connect.Error passes through unchanged.
func fsError(op, path string, err error) error { return fsErrors.Connect(op, path, err) }

func invalidArg(format string, args ...any) error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(format, args...))
}

// httpStatus is the envd HTTP status for an error: the SDKs map 400 to
// InvalidArgumentError, 401 to AuthenticationError, 404 to
// FileNotFoundError and 507 to NotEnoughSpaceError.
func httpStatus(err error) int {
	switch connect.CodeOf(err) {
	case connect.CodeNotFound:
		return http.StatusNotFound
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodeOutOfRange:
		return http.StatusBadRequest
	case connect.CodeUnauthenticated:
		return http.StatusUnauthorized
	case connect.CodePermissionDenied:
		return http.StatusForbidden
	case connect.CodeAlreadyExists, connect.CodeAborted:
		return http.StatusConflict
	case connect.CodeResourceExhausted:
		return http.StatusInsufficientStorage
	case connect.CodeCanceled:
		return 499 // the client went away; nobody reads this
	default:
		return http.StatusInternalServerError
	}
}

// writeError answers envd's JSON error shape {"code": <status>, "message": ...}.
func writeError(w http.ResponseWriter, err error) {
	status := httpStatus(err)
	msg := err.Error()
	var ce *connect.Error
	if errors.As(err, &ce) {
		msg = ce.Message()
	}
	writeJSON(w, status, struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{status, msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"code":500,"message":"encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
