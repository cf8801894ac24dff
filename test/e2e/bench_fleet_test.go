package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/testutil"
)

// TestBenchFleetQuick runs the fleet suite at smoke sizes (`warren bench
// --suite fleet --quick`): it starts its own control plane, two node daemons
// and a gateway, reports every figure with samples, and leaves none of its
// data directories behind. Nothing is asserted about the numbers.
func TestBenchFleetQuick(t *testing.T) {
	// Serial: it measures, and starts a fleet of its own.
	testutil.RequireRoot(t)
	bin := filepath.Join(binDir(t), "warren")
	// Its temporary directory (nodes' data directories, kubeconfig) is
	// in TMPDIR: short paths, for the sandboxes' sockets.
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "warren-bench-fleet-*"))
	cmd := exec.Command(bin, "bench", "--suite", "fleet", "--quick")
	cmd.Env = append(os.Environ(), "WARREN_CACHE_DIR="+cacheDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("warren bench --suite fleet --quick: %v\nstderr:\n%s", err, errb.String())
	}
	var figures map[string]json.RawMessage
	if err := json.Unmarshal(out.Bytes(), &figures); err != nil {
		t.Fatalf("bench output is not JSON: %v\n%s", err, out.String())
	}
	if n := string(figures["nodes"]); n != "2" {
		t.Errorf("nodes = %s, want 2", n)
	}
	type stats struct {
		N   int      `json:"n"`
		P50 *float64 `json:"p50_ms"`
		P99 *float64 `json:"p99_ms"`
	}
	type pair struct {
		Gateway, Direct stats
		AddedP50        *float64 `json:"added_p50_ms"`
		RatioP50        *float64 `json:"ratio_p50"`
		RatioP99        *float64 `json:"ratio_p99"`
	}
	for _, name := range []string{"create", "exec_true", "get_sandbox"} {
		var p pair
		if err := json.Unmarshal(figures[name], &p); err != nil {
			t.Errorf("%s: %v in %s", name, err, figures[name])
			continue
		}
		if p.Gateway.N == 0 || p.Direct.N == 0 || p.Gateway.P50 == nil || p.Direct.P99 == nil ||
			p.AddedP50 == nil || p.RatioP50 == nil || p.RatioP99 == nil || *p.RatioP50 <= 0 {
			t.Errorf("%s lacks a figure: %s", name, figures[name])
		}
	}
	var loss struct {
		Lease       float64 `json:"lease_s"`
		AfterExpiry stats   `json:"lost_after_expiry"`
		AfterKill   stats   `json:"lost_after_kill"`
	}
	if err := json.Unmarshal(figures["node_loss"], &loss); err != nil || loss.Lease <= 0 ||
		loss.AfterExpiry.N == 0 || loss.AfterKill.N == 0 || loss.AfterExpiry.P50 == nil {
		t.Errorf("node_loss lacks a figure (%v): %s", err, figures["node_loss"])
	}
	if !strings.Contains(errb.String(), "exec_true.gateway") {
		t.Errorf("no readable table on stderr:\n%.2000s", errb.String())
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "warren-bench-fleet-*"))
	for _, d := range after {
		if !slices.Contains(before, d) {
			t.Errorf("the fleet suite left %s behind", d)
		}
	}
}
