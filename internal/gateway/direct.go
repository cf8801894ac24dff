package gateway

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// directProxy forwards the common call — no body or a small one already
// in memory, no upgrade — on the handler's own goroutine: it writes the
// request to a kept-alive connection to the node and reads the answer from
// it itself. http.Transport hands each request to a writer goroutine and
// each answer back from a reader goroutine; on a loaded host every such
// handoff may wait for a core, and they were most of what the gateway
// added to an exec beyond its two socket hops. Anything else (streams
// with no length, upgrades, Expect) takes the ReverseProxy, whose
// behaviour this one keeps: the same headers out (hop-by-hop dropped,
// X-Forwarded-*), the answer passed on as it arrives, flushed per read.
type directProxy struct {
	mu   sync.Mutex
	idle map[string][]*nodeConn // by the node's host:port, newest last
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	bufs *copyBuffers
}

// nodeConn is one kept-alive HTTP/1.1 connection to a node.
type nodeConn struct {
	c     net.Conn
	br    *bufio.Reader
	bw    *bufio.Writer
	since time.Time // idle since
}

const (
	// maxIdlePerNode bounds the kept connections to one node (as the
	// transport's MaxIdleConnsPerHost).
	maxIdlePerNode = 256
	// maxConnIdle is older than any kept connection is reused: the node
	// closes them after two minutes idle.
	maxConnIdle = 60 * time.Second
	connBufSize = 16 << 10
)

func newDirectProxy(bufs *copyBuffers) *directProxy {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &directProxy{idle: map[string][]*nodeConn{}, dial: d.DialContext, bufs: bufs}
}

// eligible reports whether r can take the direct path to t: a plain HTTP
// node, no upgrade, and a body that is either absent or held in memory.
func directEligible(r *http.Request, t target, body []byte) bool {
	if t.node.Scheme != "http" || (t.node.Path != "" && t.node.Path != "/") || t.node.RawQuery != "" {
		return false
	}
	if r.Method == http.MethodConnect || r.Header.Get("Upgrade") != "" || r.Header.Get("Expect") != "" || len(r.TransferEncoding) > 0 {
		return false
	}
	return int64(len(body)) == r.ContentLength || (r.ContentLength == 0 && body == nil)
}

// take returns a kept connection to addr, or dials one. A kept one the
// node has closed meanwhile (a read that would not block finds its end)
// is dropped, as the transport's reader goroutine would have noticed.
func (p *directProxy) take(ctx context.Context, addr string) (*nodeConn, bool, error) {
	for {
		p.mu.Lock()
		list := p.idle[addr]
		if len(list) == 0 {
			p.mu.Unlock()
			break
		}
		nc := list[len(list)-1]
		p.idle[addr] = list[:len(list)-1]
		p.mu.Unlock()
		if time.Since(nc.since) < maxConnIdle && stillOpen(nc.c) {
			return nc, true, nil
		}
		_ = nc.c.Close()
	}
	c, err := p.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	return &nodeConn{c: c, br: bufio.NewReaderSize(c, connBufSize), bw: bufio.NewWriterSize(c, connBufSize)}, false, nil
}

// put keeps nc for the next call to addr.
func (p *directProxy) put(addr string, nc *nodeConn) {
	nc.since = time.Now()
	p.mu.Lock()
	if len(p.idle[addr]) < maxIdlePerNode {
		p.idle[addr] = append(p.idle[addr], nc)
		nc = nil
	}
	p.mu.Unlock()
	if nc != nil {
		_ = nc.c.Close()
	}
}

// stillOpen peeks at an idle connection without blocking: nothing to read
// (EAGAIN) is the only state in which a kept connection is usable; an end
// of stream, an error or stray bytes mean it is not.
func stillOpen(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var one [1]byte
	_ = raw.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), one[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = n < 0 && errors.Is(err, syscall.EAGAIN)
		return true // never wait for it to become readable
	})
	return open
}

// errNotSent marks a failure before any of the request reached the node:
// the caller may try again on a fresh connection.
var errNotSent = errors.New("the request was not sent")

// serve forwards r to t on the direct path and passes the answer on. It
// reports errors the way the ReverseProxy does: before the answer's
// headers, to onError (a 502); after them, by aborting the response.
func (p *directProxy) serve(w http.ResponseWriter, r *http.Request, t target, body []byte, onError func(error)) {
	res, nc, stop, err := p.roundTrip(r, t, body)
	if err != nil {
		onError(err)
		return
	}
	defer stop()
	if err := learnCreatedFor(t, res); err != nil {
		_ = nc.c.Close()
		onError(err)
		return
	}
	announceAnswer(w.Header(), res)
	w.WriteHeader(res.StatusCode)
	kept := false
	// The connection goes back as soon as the answer is read whole, before
	// its last piece is written: a client's next call finds it then.
	release := func() {
		if stop() && !res.Close && nc.br.Buffered() == 0 {
			p.put(t.node.Host, nc)
			kept = true
		}
	}
	err = p.copyAnswer(w, res.Body, release)
	if !kept {
		_ = nc.c.Close()
	}
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	for k, vv := range res.Trailer {
		w.Header()[k] = vv
	}
}

// roundTrip writes the request on a kept (or new) connection and reads the
// answer's headers. Until stop is called, the client leaving (r's context
// done) cuts the connection, as the transport does; stop reports false
// once it has. A kept connection that fails before the answer begins is
// retried once on a new one when nothing was sent, or when the request
// may be replayed (the transport's rule).
func (p *directProxy) roundTrip(r *http.Request, t target, body []byte) (*http.Response, *nodeConn, func() bool, error) {
	ctx := r.Context()
	for attempt := 0; ; attempt++ {
		nc, reused, err := p.take(ctx, t.node.Host)
		if err != nil {
			return nil, nil, nil, err
		}
		stop := context.AfterFunc(ctx, func() { _ = nc.c.SetDeadline(time.Unix(1, 0)) })
		res, err := exchange(nc, r, t, body)
		if err == nil {
			return res, nc, stop, nil
		}
		stop()
		_ = nc.c.Close()
		if ctx.Err() != nil {
			return nil, nil, nil, ctx.Err()
		}
		if !reused || attempt > 0 || !(errors.Is(err, errNotSent) || replayable(r)) {
			return nil, nil, nil, err
		}
	}
}

// exchange writes r on nc and reads the answer's headers.
func exchange(nc *nodeConn, r *http.Request, t target, body []byte) (*http.Response, error) {
	writeRequestHead(nc.bw, r, t, body)
	_, _ = nc.bw.Write(body)
	if err := nc.bw.Flush(); err != nil {
		return nil, errors.Join(errNotSent, err)
	}
	res, err := http.ReadResponse(nc.br, r)
	for err == nil && res.StatusCode >= 100 && res.StatusCode < 200 && res.StatusCode != http.StatusSwitchingProtocols {
		res, err = http.ReadResponse(nc.br, r) // 1xx: the final answer follows
	}
	if err == nil && res.StatusCode == http.StatusSwitchingProtocols {
		err = errors.New("the node switched protocols on a request that asked for none")
	}
	return res, err
}

// replayable is the transport's rule for resending a request that may
// have reached the node: safe methods, or one the client made idempotent.
func replayable(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return r.Header.Get("Idempotency-Key") != "" || r.Header.Get("X-Idempotency-Key") != ""
}

// writeRequestHead writes the request line and the headers the
// ReverseProxy would send for r (see newProxy).
func writeRequestHead(bw *bufio.Writer, r *http.Request, t target, body []byte) {
	host := t.node.Host
	if t.rt.byHost {
		host = r.Host
	}
	bw.WriteString(r.Method + " " + r.URL.RequestURI() + " HTTP/1.1\r\nHost: " + host + "\r\n")
	drop := connectionTokens(r.Header)
	for k, vv := range r.Header {
		if hopByHop[k] || forwardedHeaders[k] || (drop != nil && drop[k]) || (t.rt.byHost && sandboxHeaders[k]) {
			continue
		}
		for _, v := range vv {
			bw.WriteString(k + ": " + headerValue(v) + "\r\n")
		}
	}
	if te := r.Header.Values("Te"); len(te) > 0 && strings.Contains(strings.ToLower(strings.Join(te, ",")), "trailers") {
		bw.WriteString("Te: trailers\r\n")
	}
	if clientIP, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		bw.WriteString("X-Forwarded-For: " + clientIP + "\r\n")
	}
	bw.WriteString("X-Forwarded-Host: " + headerValue(r.Host) + "\r\n")
	if r.TLS == nil {
		bw.WriteString("X-Forwarded-Proto: http\r\n")
	} else {
		bw.WriteString("X-Forwarded-Proto: https\r\n")
	}
	if t.rt.byHost {
		bw.WriteString("E2b-Sandbox-Id: " + t.rt.id + "\r\nE2b-Sandbox-Port: " + strconv.Itoa(t.rt.port) + "\r\n")
	}
	if len(body) > 0 || r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch {
		bw.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n")
	}
	bw.WriteString("\r\n")
}

// headerValue keeps a header value on its line (as net/http's writer does).
func headerValue(v string) string {
	if strings.ContainsAny(v, "\r\n") {
		return strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
	}
	return v
}

// hopByHop are the headers that concern one connection, never forwarded
// (RFC 9110 7.6.1), in canonical form; Te is re-added as "trailers" only.
var hopByHop = map[string]bool{
	"Connection": true, "Proxy-Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Host": true, "Content-Length": true,
}

// forwardedHeaders are replaced by the gateway's own (SetXForwarded).
var forwardedHeaders = map[string]bool{
	"Forwarded": true, "X-Forwarded-For": true, "X-Forwarded-Host": true, "X-Forwarded-Proto": true,
}

// sandboxHeaders are set by the gateway for a request routed by Host.
var sandboxHeaders = map[string]bool{"E2b-Sandbox-Id": true, "E2b-Sandbox-Port": true}

// connectionTokens are the headers a Connection header names, which are
// hop-by-hop too.
func connectionTokens(h http.Header) map[string]bool {
	vv := h["Connection"]
	if len(vv) == 0 {
		return nil
	}
	out := map[string]bool{}
	for _, v := range vv {
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				out[http.CanonicalHeaderKey(f)] = true
			}
		}
	}
	return out
}

// announceAnswer copies the answer's end-to-end headers to h, and
// announces its trailers, which follow the body.
func announceAnswer(h http.Header, res *http.Response) {
	drop := connectionTokens(res.Header)
	for k, vv := range res.Header {
		if k == "Content-Length" || (!hopByHop[k] && (drop == nil || !drop[k])) {
			h[k] = vv
		}
	}
	if len(res.Trailer) > 0 {
		names := make([]string, 0, len(res.Trailer))
		for k := range res.Trailer {
			names = append(names, k)
		}
		h.Set("Trailer", strings.Join(names, ", "))
	}
}

// copyAnswer passes the answer's body on as it arrives, flushing after
// every read (the ReverseProxy's FlushInterval -1), and reads it to its end
// so the connection can be kept; done runs once it has been. A read holds
// all the node has sent so far (the chunked reader goes on across chunks
// already buffered), so one node write is never split into several. The
// read that reaches the end is not flushed: the server's own flush when
// the handler returns sends it with the body's end in one write, where a
// flush here would make the end (a chunked body's last chunk) a second.
func (p *directProxy) copyAnswer(w http.ResponseWriter, body io.Reader, done func()) error {
	buf := p.bufs.Get()
	defer p.bufs.Put(buf)
	rc := http.NewResponseController(w)
	for {
		n, err := body.Read(buf)
		if err == io.EOF {
			done()
		}
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if err != io.EOF {
				if ferr := rc.Flush(); ferr != nil {
					return ferr
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
