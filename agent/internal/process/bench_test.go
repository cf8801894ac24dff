package process

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
)

// BenchmarkExecTrue is the agent's share of an Exec round trip (in-process
// HTTP/2 on loopback; the daemon-side benchmark is in internal/agentconn).
func BenchmarkExecTrue(b *testing.B) {
	c, _ := newClient(b)
	req := &agentv1.ExecRequest{Argv: []string{"/bin/true"}}
	for b.Loop() {
		st, err := c.Exec(context.Background(), connect.NewRequest(req))
		if err != nil {
			b.Fatal(err)
		}
		for st.Receive() {
		}
		if err := st.Err(); err != nil {
			b.Fatal(err)
		}
		st.Close()
	}
}
