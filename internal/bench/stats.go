// Package bench measures warren's latencies on this machine and reports
// them as JSON: sandbox create → first output, exec round trips (through the
// API, straight to the agent, and a naive per-command runtime entry as the
// baseline), delete, pause and resume, a create served from a warm pool,
// and HTTP through the port route (against the same server on the host's
// loopback).
package bench

import (
	"sort"
	"time"
)

// Stats summarises one measured operation, in milliseconds.
type Stats struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	Mean float64 `json:"mean_ms"`
	Min  float64 `json:"min_ms"`
	Max  float64 `json:"max_ms"`
}

// Summarise computes Stats over samples.
func Summarise(samples []time.Duration) Stats {
	if len(samples) == 0 {
		return Stats{}
	}
	s := append([]time.Duration(nil), samples...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return Stats{
		N:    len(s),
		P50:  ms(percentile(s, 0.50)),
		P90:  ms(percentile(s, 0.90)),
		P99:  ms(percentile(s, 0.99)),
		Mean: ms(sum / time.Duration(len(s))),
		Min:  ms(s[0]),
		Max:  ms(s[len(s)-1]),
	}
}

// percentile picks the nearest-rank percentile of sorted samples.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(p*float64(len(sorted))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}
