package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchQuick runs every benchmark suite at smoke sizes (`warren bench
// --quick --suite all`), the way CI checks that each scenario still runs:
// every suite reports, and every measured figure has samples. Nothing is
// asserted about the numbers.
func TestBenchQuick(t *testing.T) {
	// Serial: it measures, and its suites start sandboxes at full tilt.
	bin := filepath.Join(binDir(t), "warren")
	plot := filepath.Join(t.TempDir(), "bench.svg")
	cmd := exec.Command(bin, "bench", "--quick", "--suite", "all", "--plot", plot)
	cmd.Env = os.Environ()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("warren bench --quick: %v\nstderr:\n%s", err, errb.String())
	}
	var rep map[string]any
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("bench output is not JSON: %v\n%s", err, out.String())
	}
	for _, suite := range []string{"core", "snapshots", "density", "tools", "network", "gvisor", "merge", "ui", "templates"} {
		if _, ok := rep[suite]; !ok {
			t.Errorf("suite %s missing from the report", suite)
		}
	}
	if os.Getenv("WARREN_RUNSC") != "" {
		if g, _ := rep["gvisor"].(map[string]any); g["skipped"] != nil {
			t.Errorf("the gvisor suite was skipped although runsc is there: %v", g["skipped"])
		}
	}
	// Every figure (an object with n and p50_ms) has samples.
	var empty []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		if list, ok := v.([]any); ok { // the core suite's concurrency levels
			for i, el := range list {
				walk(fmt.Sprintf("%s[%d]", path, i), el)
			}
			return
		}
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		if n, ok := m["n"].(float64); ok {
			if _, isStats := m["p50_ms"]; isStats && n == 0 {
				empty = append(empty, path)
			}
			return
		}
		for k, sub := range m {
			walk(path+"."+k, sub)
		}
	}
	for suite, v := range rep {
		walk(suite, v)
	}
	if len(empty) > 0 {
		t.Errorf("figures without samples: %s", strings.Join(empty, ", "))
	}
	// Every concurrency level has the core suite's per-sandbox figures.
	core, _ := rep["core"].(map[string]any)
	levels, _ := core["concurrency"].([]any)
	if len(levels) == 0 {
		t.Errorf("the core suite has no concurrency levels")
	}
	for i, el := range levels {
		lvl, _ := el.(map[string]any)
		for _, f := range []string{"create_to_first_output", "exec_true_api", "write_4kib", "read_4kib", "pause", "resume", "port_route_headers", "turn", "fork_x1", "delete"} {
			if _, ok := lvl[f]; !ok {
				t.Errorf("core.concurrency[%d] lacks %s", i, f)
			}
		}
	}
	// The readable table goes to stderr, beside the JSON, with the
	// concurrency levels' figures.
	if table := errb.String(); !strings.Contains(table, "p50 ms") || !strings.Contains(table, "core.exec_true_api") ||
		!strings.Contains(table, "core.concurrency[3 at once].port_route_headers") {
		t.Errorf("no readable table on stderr:\n%.2000s", table)
	}
	svg, err := os.ReadFile(plot)
	if err != nil || !strings.HasPrefix(string(svg), "<svg") || !strings.Contains(string(svg), "core.exec_true_api") {
		t.Errorf("--plot wrote %d bytes (%v): %.200s", len(svg), err, svg)
	}
}
