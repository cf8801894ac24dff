package envdfs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"syscall"

	"connectrpc.com/connect"
)

// fsError turns a filesystem error into a Connect error whose code the SDKs
// act on (not_found becomes their FileNotFoundError) and whose message names
// the path once. A *connect.Error passes through unchanged.
func fsError(op, path string, err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	code := connect.CodeInternal
	msg := fmt.Sprintf("%s %s: %v", op, path, bareErr(err))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		code = connect.CodeNotFound
	case errors.Is(err, fs.ErrExist):
		code = connect.CodeAlreadyExists
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		code = connect.CodePermissionDenied
	case errors.Is(err, syscall.ENOTDIR):
		code, msg = connect.CodeFailedPrecondition, msg+" (a parent is not a directory)"
	case errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EBUSY):
		code = connect.CodeFailedPrecondition
	case errors.Is(err, syscall.EXDEV):
		code, msg = connect.CodeFailedPrecondition, msg+" (source and destination are on different filesystems)"
	case errors.Is(err, syscall.ELOOP):
		code, msg = connect.CodeFailedPrecondition, msg+" (cyclic symlink or too many levels of symlinks)"
	case errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.ENAMETOOLONG):
		code = connect.CodeInvalidArgument
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		code, msg = connect.CodeResourceExhausted, msg+" (the sandbox's disk is full or over quota)"
	}
	return connect.NewError(code, errors.New(msg))
}

// bareErr drops *fs.PathError's own op and path, which fsError states itself.
func bareErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

func invalidArg(format string, args ...any) error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(format, args...))
}

func failedPrecondition(format string, args ...any) error {
	return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf(format, args...))
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
