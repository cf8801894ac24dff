package metrics

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The Prometheus text exposition format (version 0.0.4), written by hand:
// warren exposes a few dozen series, which does not justify the client
// library and its dependencies.

// ContentType is the Content-Type of WritePrometheus's output.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// latencyBuckets are the upper bounds (seconds) of every latency histogram:
// from a cached hot-path call (~1 ms) to a long command (1 min).
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// histogram counts observations into latencyBuckets. Not safe for
// concurrent use: its owner locks.
type histogram struct {
	counts []uint64 // per bucket, not cumulative
	sum    float64
	count  uint64
}

func newHistogram() *histogram { return &histogram{counts: make([]uint64, len(latencyBuckets))} }

func (h *histogram) observe(v float64) {
	h.sum += v
	h.count++
	for i, b := range latencyBuckets {
		if v <= b {
			h.counts[i]++
			return
		}
	}
}

// histograms is a histogram family keyed by its label values.
type histograms struct {
	mu     sync.Mutex
	labels []string
	series map[string]*histogram // key: label values joined by \x00
}

func newHistograms(labels ...string) *histograms {
	return &histograms{labels: labels, series: map[string]*histogram{}}
}

func (hs *histograms) observe(d time.Duration, values ...string) {
	key := strings.Join(values, "\x00")
	hs.mu.Lock()
	defer hs.mu.Unlock()
	h := hs.series[key]
	if h == nil {
		h = newHistogram()
		hs.series[key] = h
	}
	h.observe(d.Seconds())
}

func (hs *histograms) write(w io.Writer, name, help string) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	header(w, name, help, "histogram")
	keys := make([]string, 0, len(hs.series))
	for k := range hs.series {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		h := hs.series[k]
		var pairs []string
		if len(hs.labels) > 0 {
			pairs = labelPairs(hs.labels, strings.Split(k, "\x00"))
		}
		var cum uint64
		for i, b := range latencyBuckets {
			cum += h.counts[i]
			fmt.Fprintf(w, "%s_bucket%s %d\n", name, braces(append(pairs, `le="`+formatFloat(b)+`"`)), cum)
		}
		fmt.Fprintf(w, "%s_bucket%s %d\n", name, braces(append(pairs, `le="+Inf"`)), h.count)
		fmt.Fprintf(w, "%s_sum%s %s\n", name, braces(pairs), formatFloat(h.sum))
		fmt.Fprintf(w, "%s_count%s %d\n", name, braces(pairs), h.count)
	}
}

func header(w io.Writer, name, help, typ string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

// gauge is one series of a gauge family.
type gauge struct {
	labels []string // name=value pairs, already formatted
	value  float64
}

func writeGauges(w io.Writer, name, help string, gs []gauge) { writeSeries(w, name, help, "gauge", gs) }

// writeCounters writes a counter family: its series are written like a
// gauge's; only the type differs (a counter only grows).
func writeCounters(w io.Writer, name, help string, cs []gauge) {
	writeSeries(w, name, help, "counter", cs)
}

func writeSeries(w io.Writer, name, help, typ string, gs []gauge) {
	header(w, name, help, typ)
	for _, g := range gs {
		fmt.Fprintf(w, "%s%s %s\n", name, braces(g.labels), formatFloat(g.value))
	}
}

func label(name, value string) string { return name + `="` + escapeLabel(value) + `"` }

func labelPairs(names, values []string) []string {
	out := make([]string, 0, len(names))
	for i, n := range names {
		v := ""
		if i < len(values) {
			v = values[i]
		}
		out = append(out, label(n, v))
	}
	return out
}

func braces(pairs []string) string {
	if len(pairs) == 0 {
		return ""
	}
	return "{" + strings.Join(pairs, ",") + "}"
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }

func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case math.IsNaN(f):
		return "NaN"
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}
