package agentconn

import (
	"context"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
	"github.com/warrenhq/warren/internal/testutil"
)

// BenchmarkExecTrue measures one Exec of `true` over the socket, from the
// request to the exited event, and reports the median and p99.
func BenchmarkExecTrue(b *testing.B) {
	testutil.RequireRoot(b)
	c, _, _ := setup(b)
	pc := c.Process()
	ctx := context.Background()
	req := &agentv1.ExecRequest{Argv: []string{"/bin/true"}}
	durs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		st, err := pc.Exec(ctx, connect.NewRequest(req))
		if err != nil {
			b.Fatal(err)
		}
		var exited *agentv1.Exited
		for st.Receive() {
			if e := st.Msg().GetExited(); e != nil {
				exited = e
			}
		}
		if err := st.Err(); err != nil || exited == nil || exited.ExitCode != 0 {
			b.Fatalf("exec true: %v %v", exited, err)
		}
		st.Close()
		durs = append(durs, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(durs[len(durs)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkPing measures the bare round trip over the socket.
func BenchmarkPing(b *testing.B) {
	testutil.RequireRoot(b)
	c, _, _ := setup(b)
	pc := c.Process()
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := pc.Ping(ctx, connect.NewRequest(&agentv1.PingRequest{})); err != nil {
			b.Fatal(err)
		}
	}
}
