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
	t, err := c.OpenPort(ctx, port)
	if err != nil {
		return nil, err
	}
	select {
	case <-t.dialed:
	case <-ctx.Done():
		// The stream's own watch of ctx ends the dial.
		<-t.dialed
	}
	if t.dialErr != nil {
		t.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, t.dialErr
	}
	return t, nil
}

// OpenPort is DialPort without waiting for the agent's answer: the dial is
// under way when it returns, writes are sent behind it, and a failed dial
// is the error of the first Read (and of a Write once the agent has
// answered). For a protocol where the client speaks first, such as HTTP,
// this saves a round trip through the agent per connection. ctx bounds the
// dial until the agent answers.
func (c *Conn) OpenPort(ctx context.Context, port int) (*TunnelConn, error) {
	if port < 1 || port > 65535 {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("port %d is out of range: want 1..65535", port))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopDial := context.AfterFunc(ctx, cancel)
	stream := c.Tunnel().Dial(sctx)
	t := &TunnelConn{
		stream: stream, cancel: cancel, port: port,
		recv: make(chan []byte), closed: make(chan struct{}), dialed: make(chan struct{}),
		rdl: newDeadline(), wdl: newDeadline(),
	}
	if err := stream.Send(&agentv1.DialRequest{Port: uint32(port)}); err != nil && !errors.Is(err, io.EOF) {
		// io.EOF: the agent refused at once; receive reads why.
		stopDial()
		t.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	go t.receive(ctx, stopDial)
	return t, nil
}

// TunnelConn is a net.Conn over one tunnel stream. Reads honour deadlines;
// a write deadline is checked before each write (the agent link's flow
// control is what can block a write, and it is local).
type TunnelConn struct {
	stream *connect.BidiStreamForClient[agentv1.DialRequest, agentv1.DialResponse]
	cancel context.CancelFunc
	port   int

	// dialed is closed once the agent answered the dial (or the stream
	// failed first); dialErr is then why the dial failed, or nil.
	dialed  chan struct{}
	dialErr error

	recv    chan []byte // data from the agent; closed after recvErr is set
	recvErr error
	pending []byte

	writeMu   sync.Mutex
	closeOnce sync.Once
	closed    chan struct{}
	rdl, wdl  *deadline
}

var _ net.Conn = (*TunnelConn)(nil)

// receive reads the agent's answer to the dial, then its data. stopDial
// detaches the stream from the dial's ctx once the agent has answered.
func (t *TunnelConn) receive(ctx context.Context, stopDial func() bool) {
	defer close(t.recv)
	msg, err := t.stream.Receive()
	switch {
	case err != nil:
		stopDial()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
	case !msg.GetConnected():
		stopDial()
		err = connect.NewError(connect.CodeInternal, errors.New("agent answered a tunnel dial without saying connected"))
	case !stopDial():
		err = ctx.Err()
	}
	if err != nil {
		t.dialErr, t.recvErr = err, err
		close(t.dialed)
		t.cancel() // ends the stream: the agent may have connected after all
		return
	}
	close(t.dialed)
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
		if err := t.failedDial(); err != nil {
			return n, err
		}
		end := min(n+tunnelChunk, len(b))
		if err := t.stream.Send(&agentv1.DialRequest{Data: b[n:end]}); err != nil {
			return n, t.sendError(err)
		}
		n = end
	}
	return n, nil
}

// sendError explains a failed send: when the dial failed (the agent
// refused, or the stream was cancelled because of it), that is the error,
// not the stream's io.EOF or cancellation.
func (t *TunnelConn) sendError(err error) error {
	if errors.Is(err, io.EOF) {
		// The stream ended: the agent's answer, on its way, says why.
		select {
		case <-t.dialed:
		case <-t.closed:
		}
	}
	if derr := t.failedDial(); derr != nil {
		return derr
	}
	return fmt.Errorf("tunnel to port %d: %w", t.port, err)
}

// failedDial is why the dial failed, or nil while it has not (yet).
func (t *TunnelConn) failedDial() error {
	select {
	case <-t.dialed:
		return t.dialErr
	default:
		return nil
	}
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
