package config

import (
	"runtime"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
)

func TestStartLimit(t *testing.T) {
	c := Default()
	if c.MaxConcurrentStarts != -1 {
		t.Fatalf("default --max-concurrent-starts %d, want -1 (from the CPU count)", c.MaxConcurrentStarts)
	}
	if got, want := c.StartLimit(), startsPerCPU*runtime.GOMAXPROCS(0); got != want {
		t.Errorf("StartLimit() = %d, want %d", got, want)
	}
	for _, n := range []int{0, 1, 7} {
		c.MaxConcurrentStarts = n
		if err := c.validateStarts(); err != nil || c.StartLimit() != n {
			t.Errorf("--max-concurrent-starts %d: limit %d, err %v", n, c.StartLimit(), err)
		}
	}
	c.MaxConcurrentStarts = -2
	if err := c.validateStarts(); !errdefs.IsInvalid(err) {
		t.Errorf("--max-concurrent-starts -2: %v, want ErrInvalid", err)
	}
}

func TestStartLimitFromEnv(t *testing.T) {
	t.Setenv("WARREN_MAX_CONCURRENT_STARTS", "3")
	if c := Default(); c.MaxConcurrentStarts != 3 {
		t.Errorf("WARREN_MAX_CONCURRENT_STARTS=3: %d", c.MaxConcurrentStarts)
	}
}
