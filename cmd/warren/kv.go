package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// parseKV turns repeated KEY=VALUE flag values into a map; flag names the
// flag in errors. The value may hold '=' and may be empty; the key may not.
// A later pair overrides an earlier one with the same key.
func parseKV(flag string, pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--%s %q: want KEY=VALUE", flag, p)
		}
		m[k] = v
	}
	return m, nil
}

// parseMode reads a Unix permission mode in octal ("0644", "755",
// "0o600"); "" is 0, meaning the server's default.
func parseMode(s string) (os.FileMode, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(s, "0o"), "0O"), 8, 32)
	if err != nil || n > 0o7777 {
		return 0, fmt.Errorf("--mode %q: want an octal mode such as 0644", s)
	}
	m := os.FileMode(n & 0o777)
	if n&0o4000 != 0 {
		m |= os.ModeSetuid
	}
	if n&0o2000 != 0 {
		m |= os.ModeSetgid
	}
	if n&0o1000 != 0 {
		m |= os.ModeSticky
	}
	return m, nil
}
