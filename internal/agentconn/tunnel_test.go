package agentconn

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
)

// echoServer accepts connections on loopback and echoes each until its
// client half-closes; it returns the port.
func echoServer(t *testing.T) int {
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
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// freeLoopbackPort is a port nothing listens on (it was free a moment ago).
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

func TestTunnelEcho(t *testing.T) {
	c, _, _ := setup(t)
	port := echoServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, open := range map[string]func(context.Context, int) (*TunnelConn, error){
		"DialPort": c.DialPort,
		"OpenPort": c.OpenPort,
	} {
		t.Run(name, func(t *testing.T) {
			tc, err := open(ctx, port)
			if err != nil {
				t.Fatal(err)
			}
			defer tc.Close()
			// Written at once, before the agent can have answered OpenPort.
			if _, err := io.WriteString(tc, "through the tunnel"); err != nil {
				t.Fatal(err)
			}
			if err := tc.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(tc)
			if err != nil || string(got) != "through the tunnel" {
				t.Fatalf("echo: %q, %v", got, err)
			}
		})
	}
}

func TestTunnelRefused(t *testing.T) {
	c, _, _ := setup(t)
	port := freeLoopbackPort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	_, err := c.DialPort(ctx, port)
	if connect.CodeOf(err) != connect.CodeUnavailable || !strings.Contains(err.Error(), "nothing accepts connections") {
		t.Fatalf("DialPort to a closed port: %v", err)
	}

	// OpenPort returns at once; the refusal is the first Read's error, and
	// once it is known, a Write's too (not a bare EOF).
	tc, err := c.OpenPort(ctx, port)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	_, _ = io.WriteString(tc, "GET / HTTP/1.1\r\n\r\n") // may go out before the refusal
	if _, err := tc.Read(make([]byte, 1)); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("Read after a refused OpenPort: %v", err)
	}
	if _, err := io.WriteString(tc, "more"); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("Write after a refused OpenPort: %v", err)
	}
}

func TestTunnelDialCancelled(t *testing.T) {
	c, _, _ := setup(t)
	port := echoServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.DialPort(ctx, port); !errors.Is(err, context.Canceled) {
		t.Fatalf("DialPort with a cancelled ctx: %v", err)
	}
	if _, err := c.OpenPort(ctx, port); !errors.Is(err, context.Canceled) {
		t.Fatalf("OpenPort with a cancelled ctx: %v", err)
	}
	if _, err := c.OpenPort(context.Background(), 0); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("port 0: %v", err)
	}
}
