package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// target is where one proxied request goes, carried in its context.
type target struct {
	node *url.URL
	name string
	rt   route
	// created, when set, learns the id of a sandbox the answer made
	// (creates and forks) so later calls find its node at once.
	created func(id string)
	// notHere, when set, hears that the node answered it does not hold
	// the sandbox (moved or deleted), so the memo forgets it there.
	notHere func()
}

type targetKey struct{}

// newTransport is the gateway's one connection pool to the nodes: many
// idle connections per node, since every client request reuses one.
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil, // nodes are reached directly
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 0, // long polls and streams answer late
		ExpectContinueTimeout: time.Second,
	}
}

// newProxy is the reverse proxy to the nodes. FlushInterval -1 passes
// every write at once: Connect server streams, SSE, logs and downloads
// must not wait in a buffer. Upgrades (port forwarding's warren-tcp) are
// handled by httputil.
func newProxy(transport http.RoundTripper, onError func(http.ResponseWriter, *http.Request, error), bufs *copyBuffers) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			t := pr.In.Context().Value(targetKey{}).(target)
			pr.SetURL(t.node)
			pr.SetXForwarded()
			if t.rt.byHost {
				// The node routes the sandbox plane by Host too; the headers
				// say the same in the form it reads first.
				pr.Out.Host = pr.In.Host
				pr.Out.Header.Set("E2b-Sandbox-Id", t.rt.id)
				pr.Out.Header.Set("E2b-Sandbox-Port", strconv.Itoa(t.rt.port))
			}
		},
		Transport:      transport,
		FlushInterval:  -1,
		ErrorHandler:   onError,
		ModifyResponse: learnCreated,
		BufferPool:     bufs,
	}
}

// copyBuffers lends the proxy its copy buffers: without a pool it makes a
// 32 KiB one per request, most of the garbage a small call leaves.
type copyBuffers struct{ pool sync.Pool }

const copyBufferSize = 32 << 10

func (b *copyBuffers) Get() []byte {
	if p, ok := b.pool.Get().(*[]byte); ok {
		return *p
	}
	return make([]byte, copyBufferSize)
}

func (b *copyBuffers) Put(buf []byte) {
	if cap(buf) == copyBufferSize {
		buf = buf[:copyBufferSize]
		b.pool.Put(&buf)
	}
}

// maxCreateAnswer bounds the answer to a create the gateway reads to learn
// the new sandbox's id.
const maxCreateAnswer = 1 << 20

// learnCreated is learnCreatedFor, for the ReverseProxy.
func learnCreated(res *http.Response) error {
	t, _ := res.Request.Context().Value(targetKey{}).(target)
	return learnCreatedFor(t, res)
}

// learnCreatedFor tells t a node's "not here", and reads a successful
// create's (or fork's) answer for the new sandbox's id, handing the answer
// on unchanged.
func learnCreatedFor(t target, res *http.Response) error {
	if t.notHere != nil && (res.StatusCode == http.StatusNotFound || (t.rt.kind == routePlane && res.StatusCode == http.StatusBadGateway)) {
		t.notHere()
	}
	if t.created == nil || res.StatusCode/100 != 2 {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxCreateAnswer))
	_ = res.Body.Close()
	if err != nil {
		return fmt.Errorf("read the node's answer: %w", err)
	}
	var made struct {
		SandboxID string `json:"sandboxID"`
	}
	if json.Unmarshal(body, &made) == nil && made.SandboxID != "" {
		t.created(made.SandboxID)
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	return nil
}

// forward proxies r to node.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, node Node, rt route, created func(string)) {
	u, err := url.Parse(node.Endpoint)
	if err != nil || u.Scheme == "" || u.Host == "" {
		writeError(w, fmt.Errorf("node %s advertises endpoint %q, which is not a URL: %w", node.Name, node.Endpoint, errdefs.ErrUnavailable))
		return
	}
	// A streaming call's answer may start before its request body has
	// been passed on (a Connect stream's first message, an upload the node
	// answers early); an HTTP/1 server then stops reading that body, the
	// copy to the node fails and the transport cuts the answer short.
	// Full duplex keeps both directions open. HTTP/2 always is.
	_ = http.NewResponseController(w).EnableFullDuplex()
	body, err := inlineBody(r)
	if err != nil {
		if r.Context().Err() == nil {
			writeError(w, err)
		}
		return
	}
	t := target{node: u, name: node.Name, rt: rt, created: created}
	if (rt.kind == routeSandbox || rt.kind == routePlane) && rt.id != "" {
		t.notHere = func() { g.memo.forget(sandboxKey(rt.id), node.Name) }
	}
	if g.direct != nil && directEligible(r, t, body) {
		g.direct.serve(w, r, t, body, func(err error) { g.proxyErrorFor(w, r, t, err) })
		return
	}
	ctx := context.WithValue(r.Context(), targetKey{}, t)
	g.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// proxyError answers a request its node did not take: 502 in the node's
// error shape.
func (g *Gateway) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	t, _ := r.Context().Value(targetKey{}).(target)
	g.proxyErrorFor(w, r, t, err)
}

// proxyErrorFor is proxyError for a request to t.
func (g *Gateway) proxyErrorFor(w http.ResponseWriter, r *http.Request, t target, err error) {
	if r.Context().Err() != nil {
		return // the client left
	}
	g.metrics.proxyErrors.Inc()
	g.log.Debug("proxy", "node", t.name, "path", r.URL.Path, "err", err)
	err = fmt.Errorf("node %s did not answer: %v: %w", t.name, err, errdefs.ErrUnavailable)
	if t.rt.kind == routePlane {
		writePlaneError(w, r, t.rt.id, err)
		return
	}
	writeError(w, err)
}

// maxInlineBody is the largest request body inlineBody reads.
const maxInlineBody = 64 << 10

// inlineBody reads a small request body of known length (an exec, a
// Connect unary call, a small upload) into memory before it is forwarded.
// The transport sends a body it holds in memory in one write with the
// headers; a body still to be read from the client goes in a write of its
// own after them, and the node, woken by the headers, would wait for it
// again. It also lets the transport resend the request when a kept-alive
// connection to the node turns out closed. Streams have no length, and a
// client that sent Expect: 100-continue waits for the node's word before
// it sends the body: both pass through as they come. It returns the body
// held in memory (read here, or before, as a create's), nil for none.
func inlineBody(r *http.Request) ([]byte, error) {
	if h, ok := r.Body.(*heldBody); ok {
		return h.b, nil
	}
	if r.ContentLength <= 0 || r.ContentLength > maxInlineBody || r.GetBody != nil || r.Header.Get("Expect") != "" {
		return nil, nil
	}
	body := make([]byte, r.ContentLength)
	if _, err := io.ReadFull(r.Body, body); err != nil {
		return nil, fmt.Errorf("read the request's body: %v: %w", err, errdefs.ErrInvalid)
	}
	holdBody(r, body)
	return body, nil
}

// heldBody is a request body read into memory.
type heldBody struct {
	*bytes.Reader
	b []byte
}

func (*heldBody) Close() error { return nil }

// holdBody makes body, read whole, r's body.
func holdBody(r *http.Request, body []byte) {
	r.Body = &heldBody{Reader: bytes.NewReader(body), b: body}
	r.ContentLength = int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
}
