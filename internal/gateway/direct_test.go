package gateway

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// directFront is a gateway-like front that forwards every request to node
// on the direct path (or the ReverseProxy when it is not eligible), as
// forward does.
func directFront(t *testing.T, node *httptest.Server, rt route) (*httptest.Server, *directProxy) {
	t.Helper()
	u, err := url.Parse(node.URL)
	if err != nil {
		t.Fatal(err)
	}
	p := newDirectProxy(&copyBuffers{})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := inlineBody(r)
		if err != nil {
			t.Error(err)
			return
		}
		tg := target{node: u, name: "n", rt: rt}
		if !directEligible(r, tg, body) {
			t.Errorf("%s %s did not take the direct path", r.Method, r.URL)
			return
		}
		p.serve(w, r, tg, body, func(err error) { http.Error(w, err.Error(), http.StatusBadGateway) })
	}))
	t.Cleanup(front.Close)
	return front, p
}

func TestDirectProxyHeaders(t *testing.T) {
	var got *http.Request
	var gotBody string
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got, gotBody = r, string(b)
		w.Header().Set("Connection", "X-Hop")
		w.Header().Set("X-Hop", "dropped")
		w.Header().Set("X-End", "kept")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer node.Close()
	front, _ := directFront(t, node, route{kind: routePlane, id: "sb1", byHost: true, port: 8080})
	req, _ := http.NewRequest(http.MethodPost, front.URL+"/a%2Fb/c?x=1&y=2", strings.NewReader(`{"cmd":["true"]}`))
	req.Host = "8080-sb1.example.test"
	req.Header.Set("Connection", "X-Private")
	req.Header.Set("X-Private", "hop")
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	req.Header.Set("Keep-Alive", "timeout=5")
	req.Header.Set("X-Api-Key", "k")
	req.Header.Set("E2b-Sandbox-Id", "forged")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusCreated || string(b) != `{"ok":true}` || res.Header.Get("X-End") != "kept" || res.Header.Get("X-Hop") != "" {
		t.Fatalf("answer %d %q, headers %v", res.StatusCode, b, res.Header)
	}
	checks := map[string][2]string{
		"path":      {got.URL.RawPath + "?" + got.URL.RawQuery, "/a%2Fb/c?x=1&y=2"},
		"host":      {got.Host, "8080-sb1.example.test"},
		"body":      {gotBody, `{"cmd":["true"]}`},
		"key":       {got.Header.Get("X-Api-Key"), "k"},
		"private":   {got.Header.Get("X-Private"), ""},
		"keepalive": {got.Header.Get("Keep-Alive"), ""},
		"xff":       {got.Header.Get("X-Forwarded-For"), "127.0.0.1"},
		"xfh":       {got.Header.Get("X-Forwarded-Host"), "8080-sb1.example.test"},
		"xfp":       {got.Header.Get("X-Forwarded-Proto"), "http"},
		"sandbox":   {strings.Join(got.Header.Values("E2b-Sandbox-Id"), ","), "sb1"},
		"port":      {got.Header.Get("E2b-Sandbox-Port"), "8080"},
	}
	for name, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s: node saw %q, want %q", name, c[0], c[1])
		}
	}
}

// A node that closes its idle connections (its idle timeout, a restart)
// must not fail the next call: the kept connection is found closed and a
// new one dialled.
func TestDirectProxyStaleConnection(t *testing.T) {
	var conns atomic.Int32
	node := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	node.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	node.Start()
	defer node.Close()
	front, p := directFront(t, node, route{kind: routeSandbox, id: "sb1"})
	for i := range 3 {
		if i == 2 {
			node.CloseClientConnections()
			time.Sleep(50 * time.Millisecond)
		}
		res, err := http.Post(front.URL+"/sandboxes/sb1/exec", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK || string(b) != "ok" {
			t.Fatalf("call %d: %d %q", i, res.StatusCode, b)
		}
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections to the node, want 2 (one kept for two calls, one after the node closed it)", n)
	}
	kept := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.idle[strings.TrimPrefix(node.URL, "http://")])
	}
	// The answer reaches the client before its connection is put back.
	for deadline := time.Now().Add(5 * time.Second); kept() != 1 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if n := kept(); n != 1 {
		t.Fatalf("%d idle connections kept, want 1", n)
	}
}

// A stream's pieces reach the client as the node writes them, trailers
// after them; a client that leaves cuts the node's connection.
func TestDirectProxyStream(t *testing.T) {
	release := make(chan struct{})
	cut := make(chan struct{})
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Status")
		_, _ = io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		if r.URL.Path == "/hang" {
			<-r.Context().Done()
			close(cut)
			return
		}
		<-release
		_, _ = io.WriteString(w, "second\n")
		w.Header().Set("X-Status", "done")
	}))
	defer node.Close()
	front, _ := directFront(t, node, route{kind: routePlane, id: "sb1"})
	res, err := http.Get(front.URL + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(res.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "first\n" {
		t.Fatalf("first piece %q, %v", line, err)
	}
	close(release)
	rest, err := io.ReadAll(br)
	_ = res.Body.Close()
	if err != nil || string(rest) != "second\n" || res.Trailer.Get("X-Status") != "done" {
		t.Fatalf("rest %q, %v, trailer %v", rest, err, res.Trailer)
	}

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, front.URL+"/hang", nil)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(res.Body).ReadString('\n'); err != nil || line != "first\n" {
		t.Fatalf("first piece %q, %v", line, err)
	}
	cancel()
	_ = res.Body.Close()
	select {
	case <-cut:
	case <-time.After(5 * time.Second):
		t.Fatal("the node's request went on after the client left")
	}
}

// A node that cannot be reached is the error handler's (a 502).
func TestDirectProxyUnreachable(t *testing.T) {
	node := httptest.NewServer(http.NotFoundHandler())
	node.Close()
	front, _ := directFront(t, node, route{kind: routeSandbox, id: "sb1"})
	res, err := http.Get(front.URL + "/sandboxes/sb1")
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", res.StatusCode)
	}
}

func TestDirectEligible(t *testing.T) {
	node, _ := url.Parse("http://127.0.0.1:1")
	tg := target{node: node}
	post := func(h ...string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader("{}"))
		for i := 0; i+1 < len(h); i += 2 {
			r.Header.Set(h[i], h[i+1])
		}
		return r
	}
	stream := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader("{}"))
	stream.ContentLength = -1
	for _, c := range []struct {
		name string
		r    *http.Request
		body []byte
		want bool
	}{
		{"held body", post(), []byte("{}"), true},
		{"no body", httptest.NewRequest(http.MethodGet, "/x", nil), nil, true},
		{"body not held", post(), nil, false},
		{"stream", stream, nil, false},
		{"upgrade", post("Upgrade", "warren-tcp", "Connection", "Upgrade"), []byte("{}"), false},
		{"expect", post("Expect", "100-continue"), []byte("{}"), false},
	} {
		if got := directEligible(c.r, tg, c.body); got != c.want {
			t.Errorf("%s: eligible %v, want %v", c.name, got, c.want)
		}
	}
	tls, _ := url.Parse("https://127.0.0.1:1")
	if directEligible(httptest.NewRequest(http.MethodGet, "/x", nil), target{node: tls}, nil) {
		t.Error("an https node took the direct path")
	}
}

// readsOf is a node's answer as copyAnswer's reads see it.
type readsOf []struct {
	data string
	err  error
}

func (r *readsOf) Read(p []byte) (int, error) {
	next := (*r)[0]
	*r = (*r)[1:]
	return copy(p, next.data), next.err
}

// flushLog records what had been written at each flush.
type flushLog struct {
	*httptest.ResponseRecorder
	flushes []string
}

func (f *flushLog) Flush() { f.flushes = append(f.flushes, f.Body.String()) }

// Each read the node's answer gives is flushed as one piece, except the
// one that reaches the end: the server's flush at the handler's return
// sends it with the body's end in one write.
func TestCopyAnswerFlushesPerReadNotAtTheEnd(t *testing.T) {
	p := newDirectProxy(&copyBuffers{})
	for _, tc := range []struct {
		name  string
		reads readsOf
		want  []string
	}{
		{"last piece with the end", readsOf{{"start", nil}, {"data+end", io.EOF}}, []string{"start"}},
		{"end on its own", readsOf{{"start", nil}, {"end", nil}, {"", io.EOF}}, []string{"start", "startend"}},
	} {
		w := &flushLog{ResponseRecorder: httptest.NewRecorder()}
		done := 0
		if err := p.copyAnswer(w, &tc.reads, func() { done++ }); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if done != 1 || !slices.Equal(w.flushes, tc.want) {
			t.Errorf("%s: done %d times, flushes %q, want once and %q", tc.name, done, w.flushes, tc.want)
		}
	}
}
