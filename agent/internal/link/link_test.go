package link

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

//lint:file-ignore SA1019 the test plays the daemon's side, which is x/net/http2's ClientConn on the connection the agent dials (see link.go)

// accept waits for the agent to dial in and returns an HTTP/2 client on it.
func accept(t *testing.T, ln net.Listener) *http2.ClientConn {
	t.Helper()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() { c, err := ln.Accept(); ch <- res{c, err} }()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		cc, err := (&http2.Transport{AllowHTTP: true}).NewClientConn(r.c)
		if err != nil {
			t.Fatal(err)
		}
		return cc
	case <-time.After(5 * time.Second):
		t.Fatal("agent did not dial in")
		return nil
	}
}

func get(t *testing.T, cc *http2.ClientConn) string {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://agent/hello", nil)
	resp, err := cc.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestServeRedialsAfterDaemonRestart(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hi") })
	go func() { defer close(done); Serve(ctx, sock, h, slog.New(slog.DiscardHandler)) }()

	// The daemon is not there yet: the agent keeps dialing until it is.
	time.Sleep(60 * time.Millisecond)
	for round := 0; round < 2; round++ {
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		cc := accept(t, ln)
		if got := get(t, cc); got != "hi" {
			t.Fatalf("round %d: %q", round, got)
		}
		// A daemon restart: listener and connection go away.
		cc.Close()
		ln.Close()
	}
}
