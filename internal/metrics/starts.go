package metrics

import "github.com/warrenhq/warren/internal/startgate"

// starts are the series of the gate that bounds sandbox starts at once
// (--max-concurrent-starts): how many run and wait now, and how long the
// ones that waited waited (the wait's mean is the seconds over the
// queued).
func (m *Metrics) starts() *table[startgate.Stats] {
	return newTable(nil,
		func() ([]startgate.Stats, error) { return []startgate.Stats{m.opts.Starts()}, nil },
		func(startgate.Stats) []string { return nil },
		gauge("warren_start_limit", "Sandbox starts that may run at once (0: no bound).", func(s startgate.Stats) float64 { return float64(s.Limit) }),
		gauge("warren_starts_running", "Sandbox starts running now (the runtime's start until the agent answers).", func(s startgate.Stats) float64 { return float64(s.Running) }),
		gauge("warren_starts_waiting", "Sandbox starts waiting for their turn now.", func(s startgate.Stats) float64 { return float64(s.Waiting) }),
		counter("warren_starts_total", "Sandbox starts admitted.", func(s startgate.Stats) float64 { return float64(s.Admitted) }),
		counter("warren_starts_queued_total", "Sandbox starts that waited for their turn before they ran.", func(s startgate.Stats) float64 { return float64(s.Queued) }),
		counter("warren_start_wait_seconds_total", "Seconds sandbox starts waited for their turn, summed.", func(s startgate.Stats) float64 { return s.WaitSeconds }),
		counter("warren_starts_cancelled_total", "Sandbox starts whose request ended while they waited.", func(s startgate.Stats) float64 { return float64(s.Cancelled) }),
	)
}
