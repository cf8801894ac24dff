package initproc

import (
	"maps"
	"os"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/warrenhq/warren/agent/internal/users"
)

// sandboxEnv is the environment every command starts from: the sandbox's
// envVars. As PID 1 the agent is given them (set at create) in its own
// environment; SetSandboxEnv replaces them (a claimed warm-pool sandbox).
// Outside a sandbox (tests) it starts empty. The map is never changed in
// place: a replacement swaps the pointer.
var sandboxEnv atomic.Pointer[map[string]string]

func init() {
	env := map[string]string{}
	if os.Getpid() == 1 {
		for _, kv := range os.Environ() {
			if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
				env[k] = v
			}
		}
	}
	sandboxEnv.Store(&env)
}

// SetSandboxEnv replaces the sandbox's variables for every later command.
func SetSandboxEnv(env map[string]string) {
	c := maps.Clone(env)
	if c == nil {
		c = map[string]string{}
	}
	sandboxEnv.Store(&c)
}

// perUser are the variables that follow the user a command runs as, never
// the sandbox's environment.
var perUser = map[string]bool{"HOME": true, "USER": true, "LOGNAME": true, "SHELL": true, "PWD": true}

// CommandEnv is the environment of a command run as u: a default PATH,
// LANG and term's TERM, the sandbox's variables, u's identity, then the
// request's overrides; sorted, as exec wants it.
func CommandEnv(u users.User, term string, overrides map[string]string) []string {
	env := map[string]string{"PATH": DefaultPath, "TERM": term, "LANG": "C.UTF-8"}
	for k, v := range *sandboxEnv.Load() {
		if !perUser[k] {
			env[k] = v
		}
	}
	env["HOME"], env["USER"], env["LOGNAME"], env["SHELL"] = u.Home, u.Name, u.Name, u.Shell
	for k, v := range overrides {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
