package envdfs

import (
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/agent/internal/users"
)

// maxPathLen is Linux's PATH_MAX.
const maxPathLen = 4096

// caller is the sandbox user a request acts as.
type caller struct {
	users.User
	// base is where relative paths resolve: the template's last WORKDIR
	// when it recorded one, else home ("" means home).
	base string
}

// callerOf resolves the user named by a Connect call's Basic Authorization
// header, or the sandbox's default user.
func (s *Service) callerOf(h http.Header) (caller, error) {
	name, err := users.NameFromHeader(h)
	if err != nil {
		return caller{}, connect.NewError(connect.CodeUnauthenticated, err)
	}
	return s.lookup(name)
}

// callerOfRequest is callerOf for plain HTTP, where the `username` query
// parameter may name the user too.
func (s *Service) callerOfRequest(r *http.Request) (caller, error) {
	name, err := users.NameFromRequest(r)
	if err != nil {
		return caller{}, connect.NewError(connect.CodeUnauthenticated, err)
	}
	return s.lookup(name)
}

func (s *Service) lookup(name string) (caller, error) {
	u, err := s.cfg.Users.Lookup(name)
	if err != nil {
		if errors.Is(err, users.ErrUnknown) {
			return caller{}, connect.NewError(connect.CodeUnauthenticated, fmt.Errorf("user %q does not exist in the sandbox: %w", name, err))
		}
		return caller{}, connect.NewError(connect.CodeInternal, fmt.Errorf("look up user %q: %w", name, err))
	}
	return caller{User: u, base: s.cfg.Users.DefaultDir(u.Home)}, nil
}

// resolve makes p absolute and clean the way envd does: "~" and "~/x" are the
// caller's home, relative paths (and the empty path) resolve against the
// template's workdir, else the home.
func (c caller) resolve(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", invalidArg("path %q contains a NUL byte", p)
	}
	if len(p) > maxPathLen {
		return "", invalidArg("path is longer than %d bytes", maxPathLen)
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		p = filepath.Join(c.Home, p[1:])
	} else if strings.HasPrefix(p, "~") {
		return "", invalidArg("path %q: only ~ (the acting user's home) can be expanded, not ~otheruser", p)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(c.dir(), p)
	}
	return filepath.Clean(p), nil
}

// dir is the directory relative paths resolve against.
func (c caller) dir() string {
	if c.base != "" {
		return c.base
	}
	return c.Home
}

// resolveField is resolve for a required request field.
func (c caller) resolveField(field, p string) (string, error) {
	if p == "" {
		return "", invalidArg("%s is empty: give a path (relative paths resolve against %s)", field, c.dir())
	}
	return c.resolve(p)
}

// callerAndField is callerOf then resolveField, the start of every call that
// changes one path.
func (s *Service) callerAndField(h http.Header, field, p string) (caller, string, error) {
	c, err := s.callerOf(h)
	if err != nil {
		return caller{}, "", err
	}
	p, err = c.resolveField(field, p)
	return c, p, err
}
