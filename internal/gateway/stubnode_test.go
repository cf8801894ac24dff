package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	wapi "github.com/warrenhq/warren/client"
)

// stubNode stands in for a warren node in routing tests: it holds
// sandboxes in memory, answers creates, gets and lists in the node's
// shapes and order, and says which node answered any other call (header
// X-Stub-Node), which is all the gateway's routing can observe. Real
// nodes behind the gateway are the end-to-end tests'.
type stubNode struct {
	name string
	srv  *httptest.Server

	mu        sync.Mutex
	sandboxes map[string]time.Time // id → creation time
	templates map[string]bool      // built templates (templates_test.go)
	made      int
	seen      []string // "METHOD path E2b-Sandbox-Id" of every request
	// release lets /stream write its second chunk.
	release chan struct{}
}

func newStubNode(t testing.TB, name string) *stubNode {
	n := &stubNode{name: name, sandboxes: map[string]time.Time{}, release: make(chan struct{})}
	n.srv = httptest.NewServer(http.HandlerFunc(n.serve)) // 127.0.0.1
	t.Cleanup(n.srv.Close)
	return n
}

func (n *stubNode) hold(id string, at time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sandboxes[id] = at
}

// drop forgets a sandbox, as a node does once it moved away.
func (n *stubNode) drop(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.sandboxes, id)
}

func (n *stubNode) requests() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.seen)
}

func (n *stubNode) serve(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	n.seen = append(n.seen, strings.TrimSpace(r.Method+" "+r.URL.Path+" "+r.Header.Get("E2b-Sandbox-Id")))
	n.mu.Unlock()
	w.Header().Set("X-Stub-Node", n.name)
	if id := r.Header.Get("E2b-Sandbox-Id"); id != "" {
		n.plane(w, r, id)
		return
	}
	if r.Header.Get("X-API-Key") == "" {
		writeJSON(w, http.StatusUnauthorized, wapi.Error{Code: 401, Message: "missing API key"})
		return
	}
	segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/sandboxes":
		n.create(w, r)
	case r.Method == http.MethodGet && (r.URL.Path == "/sandboxes" || r.URL.Path == "/v2/sandboxes"):
		n.list(w, r)
	case r.Header.Get("Upgrade") == "warren-tcp":
		n.echoTCP(w)
	case r.Method == http.MethodPost && len(segs) == 3 && segs[2] == "fork":
		n.create(w, r)
	case len(segs) == 3 && segs[2] == "stream":
		n.stream(w)
	case r.Method == http.MethodGet && len(segs) == 2 && segs[0] == "sandboxes":
		n.get(w, segs[1])
	case r.Method == http.MethodGet && n.templateProbe(w, segs):
	default:
		fmt.Fprintf(w, "%s %s", r.Method, r.URL.Path)
	}
}

// plane answers the sandbox plane in the node's order: the sandbox is
// looked up first (E2B's 502 when it is not here), the caller checked
// after.
func (n *stubNode) plane(w http.ResponseWriter, r *http.Request, id string) {
	n.mu.Lock()
	_, ok := n.sandboxes[id]
	n.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusBadGateway, wapi.SandboxGone(id))
		return
	}
	if r.Header.Get("X-Access-Token") == "" {
		writeJSON(w, http.StatusUnauthorized, wapi.Error{Code: 401, Message: "sandbox " + id + " needs its access token"})
		return
	}
	fmt.Fprintf(w, "plane %s", id)
}

func (n *stubNode) create(w http.ResponseWriter, r *http.Request) {
	var in wapi.NewSandbox
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeJSON(w, http.StatusBadRequest, wapi.Error{Code: 400, Message: err.Error()})
		return
	}
	n.mu.Lock()
	n.made++
	id := fmt.Sprintf("%ssb%d", n.name, n.made)
	n.sandboxes[id] = time.Now()
	n.mu.Unlock()
	writeJSON(w, http.StatusCreated, wapi.Sandbox{SandboxID: id, TemplateID: in.TemplateID})
}

func (n *stubNode) get(w http.ResponseWriter, id string) {
	n.mu.Lock()
	at, ok := n.sandboxes[id]
	n.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, wapi.Error{Code: 404, Message: "sandbox " + id + ": not found"})
		return
	}
	writeJSON(w, http.StatusOK, wapi.SandboxDetail{Sandbox: wapi.Sandbox{SandboxID: id}, StartedAt: at})
}

// list pages as the node: by (started, id), newest first unless order=asc,
// after nextToken "<nanos>.<id>", limit records and X-Next-Token when more
// follow.
func (n *stubNode) list(w http.ResponseWriter, r *http.Request) {
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	dir := -1
	if r.URL.Query().Get("order") == "asc" {
		dir = 1
	}
	order := func(at time.Time, id string, b listed) int {
		if c := at.Compare(b.at); c != 0 {
			return c * dir
		}
		return strings.Compare(id, b.id) * dir
	}
	var after listed
	if tok := r.URL.Query().Get("nextToken"); tok != "" {
		ns, id, _ := strings.Cut(tok, ".")
		nanos, _ := strconv.ParseInt(ns, 10, 64)
		after = listed{at: time.Unix(0, nanos), id: id}
	}
	n.mu.Lock()
	var all []wapi.SandboxDetail
	for id, at := range n.sandboxes {
		if after.id == "" || order(at, id, after) > 0 {
			all = append(all, wapi.SandboxDetail{Sandbox: wapi.Sandbox{SandboxID: id}, StartedAt: at})
		}
	}
	n.mu.Unlock()
	slices.SortFunc(all, func(a, b wapi.SandboxDetail) int {
		return order(a.StartedAt, a.SandboxID, listed{at: b.StartedAt, id: b.SandboxID})
	})
	if limit > 0 && len(all) > limit {
		all = all[:limit]
		last := all[limit-1]
		w.Header().Set("X-Next-Token", strconv.FormatInt(last.StartedAt.UnixNano(), 10)+"."+last.SandboxID)
	}
	writeJSON(w, http.StatusOK, all)
}

// stream writes one chunk, then the second only once the test has read
// the first: a proxy that buffers would hold the first back.
func (n *stubNode) stream(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "first\n")
	w.(http.Flusher).Flush()
	select {
	case <-n.release:
	case <-time.After(10 * time.Second):
	}
	fmt.Fprint(w, "second\n")
}

// echoTCP takes over the connection as the node's port forwarding does
// (101, Upgrade: warren-tcp) and echoes raw bytes, prefixed by its name.
func (n *stubNode) echoTCP(w http.ResponseWriter) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: warren-tcp\r\n\r\n")
	_ = brw.Flush()
	buf := make([]byte, 256)
	for {
		k, err := brw.Read(buf)
		if err != nil {
			return
		}
		_, _ = conn.Write(append([]byte(n.name+":"), buf[:k]...))
	}
}
