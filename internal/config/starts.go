package config

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"github.com/warrenhq/warren/internal/errdefs"
)

// startsPerCPU is the default bound on sandbox starts at once, per CPU
// (--max-concurrent-starts -1). A start is CPU work with short waits in
// it (the init's sync with the daemon, the agent's dial): about two per
// core keep the cores busy while the rest wait their turn in order
// (internal/startgate; docs/benchmarks.md has the measurements).
const startsPerCPU = 2

// validateStarts checks --max-concurrent-starts.
func (c *Config) validateStarts() error {
	if c.MaxConcurrentStarts < -1 {
		return fmt.Errorf("--max-concurrent-starts %d: want -1 (from the CPU count), 0 (no bound) or a positive number: %w", c.MaxConcurrentStarts, errdefs.ErrInvalid)
	}
	return nil
}

// StartLimit is how many sandbox starts may run at once: the flag's value,
// or startsPerCPU × the CPUs this process may use for -1; 0 is no bound.
func (c *Config) StartLimit() int {
	if c.MaxConcurrentStarts >= 0 {
		return c.MaxConcurrentStarts
	}
	return startsPerCPU * runtime.GOMAXPROCS(0)
}

// startLimitFromEnv is --max-concurrent-starts's default:
// WARREN_MAX_CONCURRENT_STARTS, else -1 (from the CPU count).
func startLimitFromEnv() int {
	if n, err := strconv.Atoi(os.Getenv("WARREN_MAX_CONCURRENT_STARTS")); err == nil {
		return n
	}
	return -1
}
