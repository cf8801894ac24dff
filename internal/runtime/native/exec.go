package native

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/opencontainers/runc/libcontainer"
)

// ExecNaive runs argv in a running sandbox the way `runc exec` does: a new
// process enters the sandbox's namespaces and cgroups for this one command.
// warren runs commands through the in-sandbox agent instead; this exists as
// the baseline the agent's latency is measured against (`warren bench`).
func (r *Runtime) ExecNaive(ctx context.Context, id string, argv []string) (int, error) {
	c, err := r.load(id)
	if err != nil {
		return -1, err
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return -1, err
	}
	defer devnull.Close()
	p := &libcontainer.Process{
		Args:   argv,
		Env:    []string{defaultPath},
		Cwd:    "/",
		Stdin:  devnull,
		Stdout: devnull,
		Stderr: devnull,
		Init:   false,
	}
	if err := c.Run(p); err != nil {
		return -1, fmt.Errorf("sandbox %s: exec %q: %w", id, argv[0], err)
	}
	st, err := p.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return -1, err
	}
	return st.ExitCode(), nil
}
