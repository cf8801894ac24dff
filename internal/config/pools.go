package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
)

// Pool is one parsed --pool TEMPLATE=MIN[:MAX].
type Pool struct {
	Template string
	Min, Max int
}

// maxPoolSize bounds one pool: every pooled sandbox is a running sandbox.
const maxPoolSize = 1000

// ParsePools parses every --pool flag.
func (c *Config) ParsePools() ([]Pool, error) {
	var out []Pool
	seen := map[string]bool{}
	for _, s := range c.Pools {
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
		if seen[tmpl] {
			return nil, fmt.Errorf("--pool names template %q twice: %w", tmpl, errdefs.ErrInvalid)
		}
		seen[tmpl] = true
		out = append(out, Pool{Template: tmpl, Min: lo, Max: hi})
	}
	return out, nil
}
