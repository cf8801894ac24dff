package bench

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"strings"
)

// figure is one measured operation found in a report.
type figure struct {
	name  string
	stats Stats
}

// derived is a number a report computes from its figures — a ratio against
// a baseline, a flatness — found by its name.
type derived struct {
	name  string
	value float64
}

// readReport finds, in one walk of a report (any value that marshals to
// JSON), every Stats object with samples and every number whose key names a
// ratio or a flatness, each named by its path: in key order, and an array's
// elements in their order (the concurrency levels, 1, 10, 50). Walking the
// report's JSON finds them the same way whatever Go types hold them.
func readReport(report any) ([]figure, []derived, error) {
	data, err := json.Marshal(report)
	if err != nil {
		return nil, nil, err
	}
	var tree any
	if err := json.Unmarshal(data, &tree); err != nil {
		return nil, nil, err
	}
	var figs []figure
	var ders []derived
	var walk func(path string, v any)
	walk = func(path string, v any) {
		if list, ok := v.([]any); ok {
			for i, el := range list {
				walk(path+elementName(i, el), el)
			}
			return
		}
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		if _, isStats := m["p50_ms"]; isStats {
			var s Stats
			b, _ := json.Marshal(m)
			if json.Unmarshal(b, &s) == nil && s.N > 0 {
				figs = append(figs, figure{strings.TrimPrefix(path, "."), s})
			}
			return
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			sub := m[k]
			if x, isNum := sub.(float64); isNum && (strings.Contains(k, "ratio") || strings.Contains(k, "flatness")) {
				ders = append(ders, derived{strings.TrimPrefix(path+"."+k, "."), x})
				continue
			}
			walk(path+"."+k, sub)
		}
	}
	walk("", tree)
	return figs, ders, nil
}

// elementName names an array's element in a figure's path: by its number
// of sandboxes where it has one (a concurrency level: "[50 at once]"), else
// by its index ("[2]").
func elementName(i int, el any) string {
	if m, ok := el.(map[string]any); ok {
		if n, ok := m["sandboxes"].(float64); ok {
			return fmt.Sprintf("[%g at once]", n)
		}
		if n, ok := m["nodes"].(float64); ok { // the placement suite's fleets
			return fmt.Sprintf("[%g nodes]", n)
		}
	}
	return fmt.Sprintf("[%d]", i)
}

// Plot layout, in SVG user units.
const (
	plotLabelW = 380
	plotAxisW  = 560
	plotRowH   = 18
	plotTop    = 40
	plotRight  = 20
)

// WritePlot draws every figure of a report as one row on a shared log
// scale: a line from min to max, a box from p50 to p90, a mark at p99.
// The shape of each distribution is what it shows; the exact numbers are
// in the JSON beside it.
func WritePlot(w io.Writer, title string, report any) error {
	figs, _, err := readReport(report)
	if err != nil {
		return err
	}
	if len(figs) == 0 {
		return fmt.Errorf("the report holds no measured figures")
	}
	lo, hi := math.Inf(1), 0.0
	for _, f := range figs {
		lo = math.Min(lo, math.Max(f.stats.Min, 0.01))
		hi = math.Max(hi, f.stats.Max)
	}
	lo = math.Pow(10, math.Floor(math.Log10(lo)))
	hi = math.Pow(10, math.Ceil(math.Log10(math.Max(hi, lo*10))))
	x := func(ms float64) float64 {
		ms = math.Max(ms, lo)
		return plotLabelW + plotAxisW*(math.Log10(ms)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))
	}
	width := plotLabelW + plotAxisW + plotRight
	height := plotTop + plotRowH*len(figs) + 30
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="monospace" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="8" y="16" font-size="13">%s — min–max line, p50–p90 box, p99 mark (ms, log scale)</text>`+"\n", html.EscapeString(title))
	for d := lo; d <= hi*1.0001; d *= 10 {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x(d), plotTop-6, x(d), height-24)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%g</text>`+"\n", x(d), height-10, d)
	}
	for i, f := range figs {
		y := plotTop + i*plotRowH
		mid := float64(y) + plotRowH/2
		s := f.stats
		fmt.Fprintf(&b, `<text x="8" y="%.1f">%s</text>`+"\n", mid+4, html.EscapeString(truncate(f.name, 56)))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#555"/>`+"\n", x(s.Min), mid, x(s.Max), mid)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="#7aa6da" stroke="#345"><title>%s: n=%d p50=%g p90=%g p99=%g ms</title></rect>`+"\n",
			x(s.P50), mid-5, math.Max(x(s.P90)-x(s.P50), 1.5), 10, html.EscapeString(f.name), s.N, s.P50, s.P90, s.P99)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#c33" stroke-width="2"/>`+"\n", x(s.P99), mid-6, x(s.P99), mid+6)
	}
	b.WriteString("</svg>\n")
	_, err = io.WriteString(w, b.String())
	return err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n+1:]
}
