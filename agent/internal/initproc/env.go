package initproc

import (
	"os"
	"sort"
	"strings"

	"github.com/warrenhq/warren/agent/internal/users"
)

// SandboxEnv is the environment every command starts from: as PID 1 the
// agent is given the sandbox's envVars (set at create) in its own
// environment. Outside a sandbox (tests) it is empty. Callers must not
// change it.
var SandboxEnv = func() map[string]string {
	env := map[string]string{}
	if os.Getpid() != 1 {
		return env
	}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			env[k] = v
		}
	}
	return env
}()

// perUser are the variables that follow the user a command runs as, never
// the sandbox's environment.
var perUser = map[string]bool{"HOME": true, "USER": true, "LOGNAME": true, "SHELL": true, "PWD": true}

// CommandEnv is the environment of a command run as u: a default PATH,
// LANG and term's TERM, the sandbox's variables, u's identity, then the
// request's overrides; sorted, as exec wants it.
func CommandEnv(u users.User, term string, overrides map[string]string) []string {
	env := map[string]string{"PATH": DefaultPath, "TERM": term, "LANG": "C.UTF-8"}
	for k, v := range SandboxEnv {
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
