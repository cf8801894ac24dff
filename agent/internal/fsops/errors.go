// Package fsops holds the file system helpers shared by the agent's two file
// services (warren's own files and E2B's envdfs): errno to Connect error
// mapping, MkdirAll that chowns and rolls back, and the bounded directory walk.
package fsops

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"connectrpc.com/connect"
)

// Rule maps one errno to a Connect code; a non-empty Hint is appended to the
// message in parentheses.
type Rule struct {
	Errno syscall.Errno
	Code  connect.Code
	Hint  string
}

// Errors is a service's own rules, for the errnos the shared mapping leaves
// Internal; the two services' clients expect different codes for some of
// them (read-only file systems, symlink loops).
type Errors []Rule

// Connect turns a filesystem error into a Connect error with a code the
// clients act on (not_found becomes the SDKs' FileNotFoundError) and a
// message naming the path once. A *connect.Error passes through unchanged.
func (rules Errors) Connect(op, path string, err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	code := connect.CodeInternal
	msg := fmt.Sprintf("%s %s: %v", op, path, Unwrap(err))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		code = connect.CodeNotFound
	case errors.Is(err, fs.ErrExist):
		code = connect.CodeAlreadyExists
	case errors.Is(err, fs.ErrPermission):
		code = connect.CodePermissionDenied
	case errors.Is(err, syscall.ENOTDIR):
		code, msg = connect.CodeFailedPrecondition, msg+" (a parent is not a directory)"
	case errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTEMPTY):
		code = connect.CodeFailedPrecondition
	case errors.Is(err, syscall.EXDEV):
		code, msg = connect.CodeFailedPrecondition, msg+" (source and destination are on different filesystems)"
	case errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.ENAMETOOLONG):
		code = connect.CodeInvalidArgument
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		code, msg = connect.CodeResourceExhausted, msg+" (the sandbox's disk is full or over quota)"
	default:
		for _, r := range rules {
			if errors.Is(err, r.Errno) {
				code = r.Code
				if r.Hint != "" {
					msg += " (" + r.Hint + ")"
				}
				break
			}
		}
	}
	return connect.NewError(code, errors.New(msg))
}

// Unwrap drops *fs.PathError's and *os.LinkError's own op and path, which
// Connect states once itself.
func Unwrap(err error) error {
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
