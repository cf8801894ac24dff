package tunnel

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/agent/internal/agenttest"
	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
	"github.com/warrenhq/warren/api/gen/warren/agent/v1/agentv1connect"
)

func newClient(t *testing.T) agentv1connect.TunnelServiceClient {
	t.Helper()
	mux := http.NewServeMux()
	New().Handle(mux)
	hc, url := agenttest.Serve(t, mux)
	return agentv1connect.NewTunnelServiceClient(hc, url)
}

// listen starts a loopback server that reads everything the client sends
// until it half-closes, then answers "got N bytes" and the data upper-cased.
func listen(t *testing.T) uint32 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c)
				_, _ = c.Write([]byte(strings.ToUpper(string(b))))
			}()
		}
	}()
	return uint32(ln.Addr().(*net.TCPAddr).Port)
}

func TestDialRoundTripWithHalfClose(t *testing.T) {
	c := newClient(t)
	port := listen(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := c.Dial(ctx)
	if err := st.Send(&agentv1.DialRequest{Port: port}); err != nil {
		t.Fatal(err)
	}
	msg, err := st.Receive()
	if err != nil || !msg.GetConnected() {
		t.Fatalf("first answer %v, %v: want connected", msg, err)
	}
	// More than one chunk each way.
	payload := bytes.Repeat([]byte("abcdefgh"), 3*ChunkSize/8+5)
	for off := 0; off < len(payload); off += ChunkSize {
		if err := st.Send(&agentv1.DialRequest{Data: payload[off:min(off+ChunkSize, len(payload))]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Send(&agentv1.DialRequest{Eof: true}); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	sawEOF := false
	for {
		msg, err := st.Receive()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.GetData()) > ChunkSize {
			t.Fatalf("chunk of %d bytes", len(msg.GetData()))
		}
		got.Write(msg.GetData())
		sawEOF = sawEOF || msg.GetEof()
	}
	if !sawEOF {
		t.Fatal("no eof message")
	}
	if !bytes.Equal(got.Bytes(), bytes.ToUpper(payload)) {
		t.Fatalf("got %d bytes back, want %d upper-cased", got.Len(), len(payload))
	}
	_ = st.CloseRequest()
	_ = st.CloseResponse()
}

func TestDialRefusedAndBadPort(t *testing.T) {
	c := newClient(t)
	// A port that was just free: nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := uint32(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	for _, tc := range []struct {
		port uint32
		code connect.Code
		msg  string
	}{
		{free, connect.CodeUnavailable, "nothing accepts connections"},
		{0, connect.CodeInvalidArgument, "out of range"},
		{70000, connect.CodeInvalidArgument, "out of range"},
	} {
		st := c.Dial(context.Background())
		// The agent may refuse before the send completes: Send then says
		// io.EOF and Receive has the real error.
		if err := st.Send(&agentv1.DialRequest{Port: tc.port}); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		_, err := st.Receive()
		if connect.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Fatalf("port %d: want %v %q, got %v", tc.port, tc.code, tc.msg, err)
		}
		_ = st.CloseRequest()
		_ = st.CloseResponse()
	}
}

func TestDialCancelClosesConnection(t *testing.T) {
	c := newClient(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	closed := make(chan struct{})
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = io.Copy(io.Discard, conn) // until the half-close
		// Keep talking: writes fail only once the agent closes its end.
		for {
			if _, err := conn.Write([]byte("still here\n")); err != nil {
				close(closed)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	st := c.Dial(ctx)
	if err := st.Send(&agentv1.DialRequest{Port: uint32(ln.Addr().(*net.TCPAddr).Port), Data: []byte("hi")}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Receive(); err != nil {
		t.Fatal(err)
	}
	// The daemon's side closes this way: end the request, then cancel.
	_ = st.CloseRequest()
	cancel()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the agent kept the connection open after the stream was cancelled")
	}
}

// TestClientGoneWhileSending: the daemon's side may drop a stream while the
// agent is sending (an HTTP client that read its Content-Length and left).
// A send after the handler returned would crash the agent, PID 1.
func TestClientGoneWhileSending(t *testing.T) {
	c := newClient(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				chunk := bytes.Repeat([]byte("x"), 1000)
				for {
					if _, err := conn.Write(chunk); err != nil {
						return
					}
				}
			}()
		}
	}()
	port := uint32(ln.Addr().(*net.TCPAddr).Port)
	for range 50 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st := c.Dial(ctx)
		if err := st.Send(&agentv1.DialRequest{Port: port}); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := st.Receive(); err != nil {
				t.Fatal(err)
			}
		}
		_ = st.CloseRequest()
		cancel()
		_ = st.CloseResponse()
	}
}

// TestDialDataBeforeAnswer: a daemon that does not wait for "connected"
// sends its data right behind the port (an HTTP request through the port
// route); the data reaches the server and the answer still comes first.
func TestDialDataBeforeAnswer(t *testing.T) {
	c := newClient(t)
	port := listen(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := c.Dial(ctx)
	for _, m := range []*agentv1.DialRequest{{Port: port}, {Data: []byte("early ")}, {Data: []byte("bytes")}, {Eof: true}} {
		if err := st.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	msg, err := st.Receive()
	if err != nil || !msg.GetConnected() {
		t.Fatalf("first answer %v, %v: want connected", msg, err)
	}
	var got bytes.Buffer
	for {
		msg, err := st.Receive()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got.Write(msg.GetData())
	}
	if want := "EARLY BYTES"; !strings.Contains(got.String(), want) {
		t.Fatalf("server answered %q, want it to contain %q", got.String(), want)
	}
	_ = st.CloseRequest()
	_ = st.CloseResponse()
}
