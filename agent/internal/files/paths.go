package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"connectrpc.com/connect"
)

// resolve makes p absolute and clean; relative paths resolve against the
// workspace, and an empty path is the workspace itself.
func (s *Service) resolve(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", connect.NewError(connect.CodeInvalidArgument, errors.New("path must not contain NUL bytes"))
	}
	if len(p) > 4096 {
		return "", connect.NewError(connect.CodeInvalidArgument, errors.New("path is longer than 4096 bytes"))
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.cfg.Workspace, p)
	}
	return filepath.Clean(p), nil
}

// resolveNonEmpty is resolve for operations that change a path, where an
// empty path is more likely a client bug than a wish to touch the workspace.
func (s *Service) resolveNonEmpty(field, p string) (string, error) {
	if p == "" {
		return "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is empty: give a path (relative ones resolve against %s)", field, s.cfg.Workspace))
	}
	return s.resolve(p)
}

// toConnect turns a filesystem error into a Connect error with a code the
// daemon can act on and a message naming the path.
func toConnect(op, path string, err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	code := connect.CodeInternal
	msg := fmt.Sprintf("%s %s: %v", op, path, unwrapPathError(err))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		code = connect.CodeNotFound
	case errors.Is(err, fs.ErrExist):
		code = connect.CodeAlreadyExists
	case errors.Is(err, fs.ErrPermission):
		code = connect.CodePermissionDenied
	case errors.Is(err, syscall.ENOTDIR):
		code, msg = connect.CodeFailedPrecondition, msg+" (a parent is not a directory)"
	case errors.Is(err, syscall.EISDIR):
		code = connect.CodeFailedPrecondition
	case errors.Is(err, syscall.ENOTEMPTY):
		code = connect.CodeFailedPrecondition
	case errors.Is(err, syscall.EXDEV):
		code, msg = connect.CodeFailedPrecondition, msg+" (source and destination are on different filesystems)"
	case errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, syscall.ELOOP):
		code = connect.CodeInvalidArgument
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		code, msg = connect.CodeResourceExhausted, msg+" (the sandbox's disk is full or over quota)"
	case errors.Is(err, syscall.EROFS):
		code = connect.CodeFailedPrecondition
	}
	return connect.NewError(code, errors.New(msg))
}

// unwrapPathError drops *fs.PathError's own op and path, which toConnect
// states once itself.
func unwrapPathError(err error) error {
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

func failedPrecondition(format string, args ...any) error {
	return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf(format, args...))
}
