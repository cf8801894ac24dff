package tools

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/warrenhq/warren/agent/internal/reaper"
	"github.com/warrenhq/warren/agent/internal/users"
)

// maxPathLen is Linux's PATH_MAX.
const maxPathLen = 4096

// call is what one tool invocation runs with.
type call struct {
	user     users.User
	dir      string       // absolute; relative paths resolve against it
	progress func([]byte) // nil: nobody follows the output
	reaper   *reaper.Reaper
}

// abs makes p absolute and clean: "~" and "~/x" are the user's home,
// relative paths resolve against the call's directory.
func (c *call) abs(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", errors.New("the path contains a NUL byte")
	}
	if len(p) > maxPathLen {
		return "", fmt.Errorf("the path is longer than %d bytes", maxPathLen)
	}
	switch {
	case p == "~" || strings.HasPrefix(p, "~/"):
		p = filepath.Join(c.user.Home, p[1:])
	case strings.HasPrefix(p, "~"):
		return "", fmt.Errorf("%q: only ~ (the acting user's home) can be expanded, not ~otheruser", p)
	case !filepath.IsAbs(p):
		p = filepath.Join(c.dir, p)
	}
	return filepath.Clean(p), nil
}

// absOr is abs with a default for an empty path (the call's directory).
func (c *call) absOr(p string) (string, error) {
	if p == "" {
		return c.dir, nil
	}
	return c.abs(p)
}

// owner is who new files and directories belong to.
func (c *call) owner() (uid, gid int) { return int(c.user.UID), int(c.user.GID) }
