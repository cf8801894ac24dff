//go:build !kube

package main

import (
	"strings"
	"testing"
)

// Without warren-fleet beside it (the test binary has none), each command
// warren hands to it says what is missing and where it was looked for.
func TestHandOffNeedsWarrenFleet(t *testing.T) {
	t.Setenv(fleetBinEnv, "")
	for _, argv := range [][]string{
		{"gateway", "--listen", "127.0.0.1:0"},
		{"node", "drain", "n1"},
		{"serve", "--cluster", "kubernetes", "--data-dir", t.TempDir()},
		{"bench", "--suite", "fleet"},
	} {
		r := cli(t, nil, "", argv...)
		if r.code == 0 || !strings.Contains(r.stderr, "warren-fleet is missing") || !strings.Contains(r.stderr, fleetBinEnv) {
			t.Errorf("%v: exit %d, stderr %q; want the missing warren-fleet named", argv, r.code, r.stderr)
		}
	}
}

func TestHandOffFleetBinEnv(t *testing.T) {
	t.Setenv(fleetBinEnv, "/nonexistent/warren-fleet")
	r := cli(t, nil, "", "gateway")
	if r.code == 0 || !strings.Contains(r.stderr, "$"+fleetBinEnv) || !strings.Contains(r.stderr, "/nonexistent/warren-fleet") {
		t.Errorf("exit %d, stderr %q; want the bad %s named", r.code, r.stderr, fleetBinEnv)
	}
}
