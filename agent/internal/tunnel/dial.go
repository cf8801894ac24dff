package tunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
)

type dialStream = connect.BidiStream[agentv1.DialRequest, agentv1.DialResponse]

// Dial connects to a port inside the sandbox and copies bytes both ways until
// both sides have shut their write side, or either fails.
func (s *Service) Dial(ctx context.Context, stream *dialStream) error {
	first, err := stream.Receive()
	if err != nil {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("tunnel: no first message naming the port: %w", err))
	}
	port := first.GetPort()
	if port < 1 || port > 65535 {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("tunnel: port %d is out of range: want 1..65535", port))
	}
	addr := net.JoinHostPort(s.host, strconv.Itoa(int(port)))
	nc, err := s.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("nothing accepts connections on port %d inside the sandbox (start a server listening on 127.0.0.1:%d or 0.0.0.0:%d): %w", port, port, port, err))
	}
	conn := nc.(*net.TCPConn)
	defer conn.Close()
	// A cancelled stream (the daemon's side closed) must unblock the reads.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	// Only this goroutine sends, so no Send can outlive the handler (the
	// HTTP/2 server panics on a write after the handler returned). The
	// goroutine only receives; a Receive pending at return ends with an error.
	// It starts before the answer goes out: a daemon that did not wait for
	// the answer has its first bytes queued already (an HTTP request), and
	// they reach the server while the answer is written.
	upc := make(chan error, 1)
	go func() {
		err := upstream(stream, conn, first)
		if err != nil {
			conn.Close() // ends downstream's Read
		}
		upc <- err
	}()
	if err := stream.Send(&agentv1.DialResponse{Connected: true}); err != nil {
		return err // upstream ends with the stream, or at the deferred Close
	}
	if err := downstream(stream, conn); err != nil {
		return err
	}
	// The server shut its side; the client's side ends with its eof, its
	// close, or a failed write.
	return <-upc
}

// upstream copies the daemon's data into the connection; the daemon's eof
// (or the end of its request stream) shuts the connection's write side.
func upstream(stream *dialStream, conn *net.TCPConn, msg *agentv1.DialRequest) error {
	for {
		if len(msg.GetData()) > 0 {
			if _, err := conn.Write(msg.GetData()); err != nil {
				return connect.NewError(connect.CodeAborted, fmt.Errorf("write to the sandbox's server: %w", err))
			}
		}
		if msg.GetEof() {
			_ = conn.CloseWrite()
			return nil
		}
		var err error
		msg, err = stream.Receive()
		if errors.Is(err, io.EOF) {
			_ = conn.CloseWrite()
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// buffers holds downstream's read buffers: a tunnel per HTTP request to a
// server that closes each connection would otherwise allocate one per
// request.
var buffers = sync.Pool{New: func() any { b := make([]byte, ChunkSize); return &b }}

// downstream copies what the server sends to the daemon, then says eof.
func downstream(stream *dialStream, conn *net.TCPConn) error {
	bp := buffers.Get().(*[]byte)
	defer buffers.Put(bp)
	buf := *bp
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			if serr := stream.Send(&agentv1.DialResponse{Data: buf[:n]}); serr != nil {
				return serr
			}
		}
		if errors.Is(err, io.EOF) {
			return stream.Send(&agentv1.DialResponse{Eof: true})
		}
		if err != nil {
			return connect.NewError(connect.CodeAborted, fmt.Errorf("read from the sandbox's server: %w", err))
		}
	}
}
