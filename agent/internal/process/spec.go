package process

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/agent/internal/initproc"
	"github.com/warrenhq/warren/agent/internal/users"
	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
)

// spec is a validated, resolved command ready to fork.
type spec struct {
	path    string // executable, resolved against PATH
	argv    []string
	env     []string
	dir     string
	cred    *syscall.Credential // nil: keep the agent's own ids
	stdin   []byte
	timeout time.Duration
	user    string // the account's name, for listings
	// keepStdin keeps a stdin pipe open after stdin is written (background
	// processes take more input later).
	keepStdin bool
	limit     uint64
}

// startError is a command that is well-formed but cannot be started (a
// missing cwd, an unknown user, no such program). It is reported in the
// `exited` event rather than as an RPC error, as the protocol says.
type startError struct{ err error }

func (e startError) Error() string { return e.err.Error() }
func (e startError) Unwrap() error { return e.err }

func invalid(format string, args ...any) error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(format, args...))
}

// buildSpec validates the request (bad requests are InvalidArgument errors)
// and resolves user, environment, cwd and program (failures are startError).
func (s *Service) buildSpec(req *agentv1.ExecRequest) (*spec, error) {
	hasArgv, hasShell := len(req.GetArgv()) > 0, req.GetShellCommand() != ""
	if hasArgv == hasShell {
		return nil, invalid("set exactly one of argv and shell_command")
	}
	if hasNUL(req.GetArgv()...) || hasNUL(req.GetShellCommand(), req.GetCwd(), req.GetUser()) {
		return nil, invalid("arguments, cwd and user must not contain NUL bytes")
	}
	if err := checkEnv(req.GetEnv()); err != nil {
		return nil, err
	}

	u, err := s.cfg.Users.Lookup(req.GetUser())
	if err != nil {
		return nil, startError{fmt.Errorf("resolve user: %w", err)}
	}
	sp := &spec{
		env:     buildEnv(u, req.GetEnv()),
		stdin:   req.GetStdin(),
		timeout: time.Duration(req.GetTimeoutMs()) * time.Millisecond,
		limit:   req.GetOutputLimitBytes(),
		cred:    u.Credential(),
		user:    u.Name,
	}
	if sp.limit == 0 {
		sp.limit = DefaultOutputLimit
	}

	// A built template's last WORKDIR replaces the workspace as the default.
	base := s.cfg.Users.DefaultDir(s.cfg.Workspace)
	sp.dir = req.GetCwd()
	if sp.dir == "" {
		sp.dir = base
	} else if !filepath.IsAbs(sp.dir) {
		sp.dir = filepath.Join(base, sp.dir)
	}
	if fi, err := os.Stat(sp.dir); err != nil {
		return nil, startError{fmt.Errorf("working directory %s: %w", sp.dir, err)}
	} else if !fi.IsDir() {
		return nil, startError{fmt.Errorf("working directory %s is not a directory", sp.dir)}
	}

	if hasShell {
		if _, err := os.Stat("/bin/bash"); err == nil {
			sp.argv = []string{"/bin/bash", "-l", "-c", req.GetShellCommand()}
		} else {
			sp.argv = []string{"/bin/sh", "-c", req.GetShellCommand()}
		}
	} else {
		sp.argv = noBashFallback(req.GetArgv())
	}
	sp.path, err = lookPath(sp.argv[0], envValue(sp.env, "PATH"), sp.dir)
	if err != nil {
		return nil, startError{err}
	}
	return sp, nil
}

// noBashFallback runs `/bin/bash -l -c CMD` (how the E2B SDK runs every
// command) with /bin/sh in an image that has no bash (alpine, busybox):
// the command is a shell line either way.
func noBashFallback(argv []string) []string {
	if len(argv) == 4 && argv[0] == "/bin/bash" && argv[1] == "-l" && argv[2] == "-c" {
		if _, err := os.Stat("/bin/bash"); errors.Is(err, fs.ErrNotExist) {
			return []string{"/bin/sh", "-l", "-c", argv[3]}
		}
	}
	return argv
}

// hasNUL reports whether any of ss holds a NUL byte, which no argument,
// path or user name passed to exec can carry.
func hasNUL(ss ...string) bool {
	for _, s := range ss {
		if strings.IndexByte(s, 0) >= 0 {
			return true
		}
	}
	return false
}

// checkEnv refuses environment variables exec cannot pass.
func checkEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return invalid("environment variable %q: names must be non-empty without '=' or NUL, values without NUL", k)
		}
	}
	return nil
}

func buildEnv(u users.User, overrides map[string]string) []string {
	return initproc.CommandEnv(u, "xterm", overrides)
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

var errNotFound = errors.New("executable file not found in PATH")

// lookPath finds name the way a shell would, but with the command's own
// PATH, not the agent's. A name with a slash is taken as is (relative to dir).
func lookPath(name, path, dir string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		return name, nil
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", name, errNotFound)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}
