package bench

import (
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

// The plot has one row per measured figure, is well-formed SVG, and skips
// figures without samples.
func TestWritePlot(t *testing.T) {
	report := map[string]any{
		"core": map[string]any{
			"exec":   Stats{N: 10, P50: 1.2, P90: 2, P99: 3, Min: 0.9, Max: 4},
			"create": Stats{N: 5, P50: 50, P90: 60, P99: 70, Min: 45, Max: 80},
			"empty":  Stats{},
			"note":   "not a figure",
		},
		"gvisor": map[string]any{"wake": Stats{N: 2, P50: 200, P90: 210, P99: 220, Min: 190, Max: 230}},
	}
	var b strings.Builder
	if err := WritePlot(&b, "test <run>", report); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	for _, want := range []string{"core.exec", "core.create", "gvisor.wake", "test &lt;run&gt;"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the plot lacks %q", want)
		}
	}
	if strings.Contains(svg, "core.empty") {
		t.Errorf("a figure without samples was drawn")
	}
	if got := strings.Count(svg, "<rect x="); got != 3 {
		t.Errorf("%d boxes, want 3", got)
	}
	dec := xml.NewDecoder(strings.NewReader(svg))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
	}
	if err := WritePlot(&b, "x", map[string]any{}); err == nil {
		t.Errorf("a report without figures should be an error")
	}
}

// The table has a row per measured figure and lists the derived ratios.
func TestWriteTable(t *testing.T) {
	report := map[string]any{
		"core": map[string]any{
			"exec":          Stats{N: 10, P50: 1.2, P90: 2, P99: 3, Min: 0.9, Max: 4},
			"empty":         Stats{},
			"ratio_p50":     12.5,
			"turn_flatness": 1.1,
			"count":         7,
		},
	}
	var b strings.Builder
	if err := WriteTable(&b, "warren bench", report); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"warren bench", "core.exec", "1.20", "core.ratio_p50", "12.5", "core.turn_flatness"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	for _, unwanted := range []string{"core.empty", "core.count"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("the table shows %q:\n%s", unwanted, out)
		}
	}
}

// An array's elements are walked in their order; a concurrency level is
// named by its number of sandboxes, anything else by its index.
func TestReadReportArrays(t *testing.T) {
	report := map[string]any{
		"concurrency": []ConcurrencyLevel{
			{Sandboxes: 1, Exec: Stats{N: 5, P50: 1}, Fork1: Stats{N: 5, P50: 9}},
			{Sandboxes: 10, Exec: Stats{N: 50, P50: 3}},
			{Sandboxes: 50, Exec: Stats{N: 250, P50: 8}},
		},
		"rounds": []map[string]any{{"turn": Stats{N: 1, P50: 2}, "turn_flatness": 1.2}},
	}
	figs, ders, err := readReport(report)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range figs {
		names = append(names, f.name)
	}
	want := []string{
		"concurrency[1 at once].exec_true_api", "concurrency[1 at once].fork_x1",
		"concurrency[10 at once].exec_true_api", "concurrency[50 at once].exec_true_api",
		"rounds[0].turn",
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("figures\n%q, want\n%q", names, want)
	}
	if len(ders) != 1 || ders[0].name != "rounds[0].turn_flatness" {
		t.Errorf("derived %+v, want rounds[0].turn_flatness", ders)
	}
}
