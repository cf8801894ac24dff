package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable prints a report for a person: one row per measured figure
// (count, p50, p90, p99, max in ms), then the ratios and flatness figures
// the report derives from them. The JSON stays the complete record.
func WriteTable(w io.Writer, title string, report any) error {
	figs, ders, err := readReport(report)
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
