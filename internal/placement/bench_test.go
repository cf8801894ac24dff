package placement_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/warrenhq/warren/internal/placement"
	"github.com/warrenhq/warren/internal/placement/placementtest"
)

// BenchmarkChoose times one decision over simulated fleets (warren bench
// --suite placement reports the same as percentiles).
func BenchmarkChoose(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			nodes := placementtest.Fleet(n, r)
			reqs := make([]placement.Request, 1024)
			for i := range reqs {
				reqs[i] = placementtest.Request(n, r)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				_, _ = placement.Choose(nodes, reqs[i%len(reqs)], r)
				i++
			}
		})
	}
}
