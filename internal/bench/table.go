package bench

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// derived is a number a report computes from its figures — a ratio against
// a baseline, a flatness — found by its name.
type derived struct {
	name  string
	value float64
}

// deriveds finds every number in a report whose key names a ratio or a
// flatness, in path order.
func deriveds(report any) ([]derived, error) {
	tree, err := jsonTree(report)
	if err != nil {
		return nil, err
	}
	var out []derived
	var walk func(path string, v any)
	walk = func(path string, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		for k, sub := range m {
			if x, isNum := sub.(float64); isNum && (strings.Contains(k, "ratio") || strings.Contains(k, "flatness")) {
				out = append(out, derived{strings.TrimPrefix(path+"."+k, "."), x})
				continue
			}
			walk(path+"."+k, sub)
		}
	}
	walk("", tree)
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// WriteTable prints a report for a person: one row per measured figure
// (count, p50, p90, p99, max in ms), then the ratios and flatness figures
// the report derives from them. The JSON stays the complete record.
func WriteTable(w io.Writer, title string, report any) error {
	figs, err := figures(report)
	if err != nil {
		return err
	}
	ders, err := deriveds(report)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\n", title)
	fmt.Fprintf(tw, "figure\tn\tp50 ms\tp90 ms\tp99 ms\tmax ms\t\n")
	for _, f := range figs {
		s := f.stats
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t\n", f.name, s.N, s.P50, s.P90, s.P99, s.Max)
	}
	if len(ders) > 0 {
		fmt.Fprintf(tw, "\t\t\t\t\t\t\n")
		fmt.Fprintf(tw, "derived\tvalue\t\t\t\t\t\n")
		for _, d := range ders {
			fmt.Fprintf(tw, "%s\t%.3g\t\t\t\t\t\n", d.name, d.value)
		}
	}
	return tw.Flush()
}
