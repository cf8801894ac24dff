package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
)

// Pool is one parsed --pool (or --network-pool)
// TEMPLATE[@RUNTIME]=MIN[:MAX[:TTL]].
type Pool struct {
	Template string
	// Runtime of the pooled sandboxes ("" = the template's, else the
	// server's default); a template can have a pool per runtime.
	Runtime  string
	Min, Max int
	// TTL replaces a ready sandbox that waited this long for a claim (0 =
	// never), so that claims get recently started ones.
	TTL time.Duration
	// Network: the pool's sandboxes have a network namespace (nothing
	// open) for creates that ask for a network.
	Network bool
}

// maxPoolSize bounds one pool: every pooled sandbox is a running sandbox.
const maxPoolSize = 1000

// minPoolTTL keeps a pool from churning: each replacement is a sandbox start.
const minPoolTTL = 10 * time.Second

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
			return nil, fmt.Errorf("--pool %q: want TEMPLATE[@RUNTIME]=MIN, TEMPLATE=MIN:MAX or TEMPLATE=MIN:MAX:TTL: %w", s, errdefs.ErrInvalid)
		}
		tmpl, rt, withRuntime := strings.Cut(tmpl, "@")
		if err := ids.ValidateName("--pool template", tmpl); err != nil {
			return nil, err
		}
		if withRuntime {
			if err := ValidateRuntime(fmt.Sprintf("--pool %q: runtime", s), rt); err != nil {
				return nil, err
			}
		}
		parts := strings.Split(sizes, ":")
		if len(parts) > 3 {
			return nil, fmt.Errorf("--pool %q: want TEMPLATE[@RUNTIME]=MIN[:MAX[:TTL]]: %w", s, errdefs.ErrInvalid)
		}
		lo, err := strconv.Atoi(parts[0])
		if err != nil || lo < 0 || lo > maxPoolSize {
			return nil, fmt.Errorf("--pool %q: MIN must be 0..%d: %w", s, maxPoolSize, errdefs.ErrInvalid)
		}
		hi := lo
		if len(parts) > 1 && parts[1] != "" {
			if hi, err = strconv.Atoi(parts[1]); err != nil || hi < lo || hi > maxPoolSize {
				return nil, fmt.Errorf("--pool %q: MAX must be MIN..%d: %w", s, maxPoolSize, errdefs.ErrInvalid)
			}
		}
		var ttl time.Duration
		if len(parts) > 2 {
			if ttl, err = time.ParseDuration(parts[2]); err != nil || ttl != 0 && ttl < minPoolTTL {
				return nil, fmt.Errorf("--pool %q: TTL must be a duration of at least %v (e.g. 10m), or 0 for none: %w", s, minPoolTTL, errdefs.ErrInvalid)
			}
		}
		key := Pool{Template: tmpl, Runtime: rt, Network: f.network}
		if seen[key] {
			return nil, fmt.Errorf("--pool names template %q twice: %w", tmpl, errdefs.ErrInvalid)
		}
		seen[key] = true
		out = append(out, Pool{Template: tmpl, Runtime: rt, Min: lo, Max: hi, TTL: ttl, Network: f.network})
	}
	return out, nil
}
