package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
)

// Pool is one parsed --pool (or --network-pool) TEMPLATE=MIN[:MAX].
type Pool struct {
	Template string
	Min, Max int
	// Network: the pool's sandboxes have a network namespace (nothing
	// open) for creates that ask for a network.
	Network bool
}

// maxPoolSize bounds one pool: every pooled sandbox is a running sandbox.
const maxPoolSize = 1000

// ParsePools parses every --pool and --network-pool flag.
func (c *Config) ParsePools() ([]Pool, error) {
	var out []Pool
	seen := map[Pool]bool{}
	type flag struct {
		s       string
		network bool
	}
	var flags []flag
	for _, s := range c.Pools {
		flags = append(flags, flag{s, false})
	}
	for _, s := range c.Network.Pools {
		flags = append(flags, flag{s, true})
	}
	for _, f := range flags {
		s := f.s
		tmpl, sizes, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("--pool %q: want TEMPLATE=MIN or TEMPLATE=MIN:MAX: %w", s, errdefs.ErrInvalid)
		}
		if err := ids.ValidateName("--pool template", tmpl); err != nil {
			return nil, err
		}
		minS, maxS, hasMax := strings.Cut(sizes, ":")
		lo, err := strconv.Atoi(minS)
		if err != nil || lo < 0 || lo > maxPoolSize {
			return nil, fmt.Errorf("--pool %q: MIN must be 0..%d: %w", s, maxPoolSize, errdefs.ErrInvalid)
		}
		hi := lo
		if hasMax {
			if hi, err = strconv.Atoi(maxS); err != nil || hi < lo || hi > maxPoolSize {
				return nil, fmt.Errorf("--pool %q: MAX must be MIN..%d: %w", s, maxPoolSize, errdefs.ErrInvalid)
			}
		}
		key := Pool{Template: tmpl, Network: f.network}
		if seen[key] {
			return nil, fmt.Errorf("--pool names template %q twice: %w", tmpl, errdefs.ErrInvalid)
		}
		seen[key] = true
		out = append(out, Pool{Template: tmpl, Min: lo, Max: hi, Network: f.network})
	}
	return out, nil
}
