package files

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/agent/internal/fsops"
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
		p = filepath.Join(s.cfg.Users.DefaultDir(s.cfg.Workspace), p) // a built template's last WORKDIR, else the workspace
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

// fsErrors is warren's mapping on top of the shared one: a symlink loop is
// a bad path, and a read-only file system a state the daemon can report.
var fsErrors = fsops.Errors{
	{Errno: syscall.ELOOP, Code: connect.CodeInvalidArgument},
	{Errno: syscall.EROFS, Code: connect.CodeFailedPrecondition},
}

// toConnect turns a filesystem error into a Connect error with a code the
// daemon can act on and a message naming the path.
func toConnect(op, path string, err error) error { return fsErrors.Connect(op, path, err) }

func failedPrecondition(format string, args ...any) error {
	return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf(format, args...))
}
