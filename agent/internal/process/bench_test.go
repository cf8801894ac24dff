package process

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/agent/internal/users"
	"github.com/warrenhq/warren/api/gen/process"
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

// BenchmarkEnvdStartTrue is the agent's share of an E2B commands.run:
// Start of /bin/true over HTTP/1.1 with the JSON codec, as the SDK sends it.
func BenchmarkEnvdStartTrue(b *testing.B) {
	e := newEnvdEnv(b, users.System)
	c := e.client("http1")
	f := false
	req := &process.StartRequest{Process: &process.ProcessConfig{Cmd: "/bin/true"}, Stdin: &f}
	for b.Loop() {
		st, err := c.Start(context.Background(), connect.NewRequest(req))
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
