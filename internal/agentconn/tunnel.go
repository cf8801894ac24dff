package agentconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
	"github.com/warrenhq/warren/api/gen/warren/agent/v1/agentv1connect"
)

// tunnelChunk bounds one data message sent to the agent (its own bound).
const tunnelChunk = 64 << 10

// Tunnel is the agent's tunnel service over whichever connection is current.
// (Built per call, not in Listen, so this file is all the tunnel adds.)
func (c *Conn) Tunnel() agentv1connect.TunnelServiceClient {
	return agentv1connect.NewTunnelServiceClient(&http.Client{Transport: roundTripper{c}}, baseURL,
		connect.WithReadMaxBytes(MaxMessageBytes), connect.WithAcceptCompression("gzip", nil, nil))
}

// DialPort opens a TCP connection to port on the sandbox's loopback through
// the agent. ctx bounds the dial only: the connection lives until Close. A
// port nobody listens on is a Connect UNAVAILABLE error from the agent.
func (c *Conn) DialPort(ctx context.Context, port int) (*TunnelConn, error) {
	if port < 1 || port > 65535 {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("port %d is out of range: want 1..65535", port))
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopDial := context.AfterFunc(ctx, cancel)
	stream := c.Tunnel().Dial(sctx)
	fail := func(err error) (*TunnelConn, error) {
		cancel()
		_ = stream.CloseRequest()
		_ = stream.CloseResponse()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if err := stream.Send(&agentv1.DialRequest{Port: uint32(port)}); err != nil && !errors.Is(err, io.EOF) {
		return fail(err)
	}
	msg, err := stream.Receive()
	if err != nil {
		return fail(err)
	}
	if !msg.GetConnected() {
		return fail(connect.NewError(connect.CodeInternal, errors.New("agent answered a tunnel dial without saying connected")))
	}
	if !stopDial() {
		return fail(ctx.Err())
	}
	t := &TunnelConn{
		stream: stream, cancel: cancel, port: port,
		recv: make(chan []byte), closed: make(chan struct{}),
		rdl: newDeadline(), wdl: newDeadline(),
	}
	go t.receive()
	return t, nil
}

// TunnelConn is a net.Conn over one tunnel stream. Reads honour deadlines;
// a write deadline is checked before each write (the agent link's flow
// control is what can block a write, and it is local).
type TunnelConn struct {
	stream *connect.BidiStreamForClient[agentv1.DialRequest, agentv1.DialResponse]
	cancel context.CancelFunc
	port   int

	recv    chan []byte // data from the agent; closed after recvErr is set
	recvErr error
	pending []byte

	writeMu   sync.Mutex
	closeOnce sync.Once
	closed    chan struct{}
	rdl, wdl  *deadline
}

var _ net.Conn = (*TunnelConn)(nil)

func (t *TunnelConn) receive() {
	defer close(t.recv)
	for {
		msg, err := t.stream.Receive()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.EOF
			}
			t.recvErr = err
			return
		}
		if len(msg.GetData()) > 0 {
			select {
			case t.recv <- msg.GetData():
			case <-t.closed:
				t.recvErr = net.ErrClosed
				return
			}
		}
		if msg.GetEof() {
			t.recvErr = io.EOF
			return
		}
	}
}

// Read reads what the sandbox's server sent; io.EOF once it shut its side.
func (t *TunnelConn) Read(b []byte) (int, error) {
	if len(t.pending) == 0 {
		select {
		case <-t.closed:
			return 0, net.ErrClosed
		case <-t.rdl.wait():
			return 0, os.ErrDeadlineExceeded
		case data, ok := <-t.recv:
			if !ok {
				return 0, t.recvErr
			}
			t.pending = data
		}
	}
	n := copy(b, t.pending)
	t.pending = t.pending[n:]
	return n, nil
}

// Write sends b to the sandbox's server in chunks the agent accepts.
func (t *TunnelConn) Write(b []byte) (int, error) {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	n := 0
	for n < len(b) {
		select {
		case <-t.closed:
			return n, net.ErrClosed
		case <-t.wdl.wait():
			return n, os.ErrDeadlineExceeded
		default:
		}
		end := min(n+tunnelChunk, len(b))
		if err := t.stream.Send(&agentv1.DialRequest{Data: b[n:end]}); err != nil {
			return n, fmt.Errorf("tunnel to port %d: %w", t.port, err)
		}
		n = end
	}
	return n, nil
}

// CloseWrite shuts the write side: the server reads EOF, and can still answer.
func (t *TunnelConn) CloseWrite() error {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	err := t.stream.Send(&agentv1.DialRequest{Eof: true})
	_ = t.stream.CloseRequest()
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("tunnel to port %d: %w", t.port, err)
	}
	return nil
}

// Close ends the stream; the agent closes the connection inside.
func (t *TunnelConn) Close() error {
	t.closeOnce.Do(func() {
		close(t.closed)
		// Ending the request first lets data already sent go out ahead of
		// the reset that cancel causes.
		t.writeMu.Lock()
		_ = t.stream.CloseRequest()
		t.writeMu.Unlock()
		t.cancel()
		_ = t.stream.CloseResponse()
	})
	return nil
}

func (t *TunnelConn) LocalAddr() net.Addr  { return tunnelAddr("agent") }
func (t *TunnelConn) RemoteAddr() net.Addr { return tunnelAddr(fmt.Sprintf("127.0.0.1:%d", t.port)) }

func (t *TunnelConn) SetDeadline(d time.Time) error {
	t.rdl.set(d)
	t.wdl.set(d)
	return nil
}
func (t *TunnelConn) SetReadDeadline(d time.Time) error  { t.rdl.set(d); return nil }
func (t *TunnelConn) SetWriteDeadline(d time.Time) error { t.wdl.set(d); return nil }

type tunnelAddr string

func (tunnelAddr) Network() string  { return "warren-tunnel" }
func (a tunnelAddr) String() string { return string(a) }

// deadline is a channel closed when a settable time passes.
type deadline struct {
	mu    sync.Mutex
	timer *time.Timer
	ch    chan struct{}
}

func newDeadline() *deadline { return &deadline{ch: make(chan struct{})} }

func (d *deadline) set(at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.ch // the timer fired: the channel is closed
	}
	d.timer = nil
	select {
	case <-d.ch:
		d.ch = make(chan struct{}) // expired earlier: re-arm
	default:
	}
	if at.IsZero() {
		return
	}
	if wait := time.Until(at); wait > 0 {
		ch := d.ch
		d.timer = time.AfterFunc(wait, func() { close(ch) })
		return
	}
	close(d.ch)
}

func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ch
}
