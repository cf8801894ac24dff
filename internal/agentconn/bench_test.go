package agentconn

import (
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
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

// BenchmarkTunnelHTTP measures an HTTP GET through a tunnel (a Dial stream
// per request, the server closing each connection) against the same GET
// made directly, to a server on the host's loopback.
func BenchmarkTunnelHTTP(b *testing.B) {
	testutil.RequireRoot(b)
	c, _, _ := setup(b)
	addr := closingServer(b)
	_, p, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(p)
	for _, bc := range []struct {
		name string
		dial func(ctx context.Context, _, _ string) (net.Conn, error)
	}{
		{"direct", (&net.Dialer{}).DialContext},
		{"dial", func(ctx context.Context, _, _ string) (net.Conn, error) { return c.DialPort(ctx, port) }},
		{"open", func(ctx context.Context, _, _ string) (net.Conn, error) { return c.OpenPort(ctx, port) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			hc := &http.Client{Transport: &http.Transport{DialContext: bc.dial}}
			defer hc.CloseIdleConnections()
			durs := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				resp, err := hc.Get("http://" + addr + "/")
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				durs = append(durs, time.Since(start))
			}
			slices.Sort(durs)
			b.ReportMetric(float64(durs[len(durs)/2].Microseconds())/1000, "p50-ms")
		})
	}
}

// closingServer serves a small page on loopback and closes every
// connection after its response, as busybox httpd does.
func closingServer(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		_, _ = io.WriteString(w, "hello from the loopback\n")
	})}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}
