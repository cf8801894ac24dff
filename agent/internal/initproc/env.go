package initproc

import (
	"os"
	"strings"
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
