package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/warrenhq/warren/internal/errdefs"
)

// maxListAnswer bounds one node's answer to a list (1000 records).
const maxListAnswer = 64 << 20

// answer is one node's answer to a fanned-out request.
type answer struct {
	node   Node
	status int
	header http.Header
	body   []byte
	err    error
}

// fanOut sends one bodiless request to every node at once, with the
// caller's own credentials, and returns the answers in node order.
func (g *Gateway) fanOut(ctx context.Context, r *http.Request, nodes []Node, method, pathQuery string) []answer {
	out := make([]answer, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			out[i] = g.fetch(ctx, r, n, method, pathQuery)
		})
	}
	wg.Wait()
	return out
}

func (g *Gateway) fetch(ctx context.Context, r *http.Request, n Node, method, pathQuery string) answer {
	a := answer{node: n}
	req, err := http.NewRequestWithContext(ctx, method, n.Endpoint+pathQuery, nil)
	if err != nil {
		a.err = err
		return a
	}
	req.Header = probeHeaders(r)
	res, err := g.http.Do(req)
	if err != nil {
		a.err = fmt.Errorf("node %s did not answer: %v: %w", n.Name, err, errdefs.ErrUnavailable)
		return a
	}
	defer res.Body.Close()
	a.status, a.header = res.StatusCode, res.Header
	a.body, a.err = io.ReadAll(io.LimitReader(res.Body, maxListAnswer))
	return a
}

// readyOrUnavailable is the Ready nodes, or errNoNode.
func (g *Gateway) readyOrUnavailable(ctx context.Context) ([]Node, error) {
	nodes, err := g.fleet.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	ready := readyNodes(nodes)
	if len(ready) == 0 {
		return nil, fmt.Errorf("no warren node is Ready (%d known): %w", len(nodes), errNoNode)
	}
	return ready, nil
}

// serveList fans a list out to the Ready nodes, each asked for a page
// after the client's cursor with its filters, and answers one merged page
// (with team's Lost sandboxes, which no node lists).
func (g *Gateway) serveList(w http.ResponseWriter, r *http.Request, kind listKind, team string) {
	q := r.URL.Query()
	limit, err := pageLimit(q.Get("limit"))
	if err != nil {
		writeError(w, err)
		return
	}
	cursor, err := decodeToken(q.Get("nextToken"))
	if err != nil {
		writeError(w, err)
		return
	}
	// Sandboxes come newest first unless order=asc, as from a node; the
	// merge must know which.
	order := q.Get("order")
	if kind == listSandboxes && order != "" && order != "asc" && order != "desc" {
		writeError(w, fmt.Errorf("order %q: want asc (oldest start first) or desc (newest first, the default): %w", order, errdefs.ErrInvalid))
		return
	}
	ready, err := g.readyOrUnavailable(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	q.Del("nextToken")
	if cursor != "" {
		q.Set("nextToken", cursor)
	}
	if kind != listTemplates {
		q.Set("limit", strconv.Itoa(limit))
	}
	pathQuery := (&url.URL{Path: r.URL.Path, RawQuery: q.Encode()}).RequestURI()
	answers := g.fanOut(r.Context(), r, ready, http.MethodGet, pathQuery)
	pages := make([][]listed, 0, len(answers))
	more := false
	for _, a := range answers {
		if a.err != nil {
			writeError(w, a.err)
			return
		}
		if a.status != http.StatusOK {
			passAnswer(w, a) // the node's own refusal (bad filter, bad key)
			return
		}
		page, err := parseListed(kind, a.body)
		if err != nil {
			writeError(w, fmt.Errorf("node %s: %v: %w", a.node.Name, err, errdefs.ErrUnavailable))
			return
		}
		if kind == listSandboxes {
			tagNode(page, a.node.Name)
		}
		pages = append(pages, page)
		more = more || a.header.Get("X-Next-Token") != ""
	}
	newest := kind == listSandboxes && order != "asc"
	if kind == listSandboxes {
		pages = append(pages, lostListed(g.fleet.LostSandboxes(), q, team, cursor, newest, ready))
	}
	page, next := mergePage(kind, pages, limit, more, newest)
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(rawArray(page))
}

// passAnswer hands a node's answer to the client as it came.
func passAnswer(w http.ResponseWriter, a answer) {
	if ct := a.header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	if wa := a.header.Get("WWW-Authenticate"); wa != "" {
		w.Header().Set("WWW-Authenticate", wa)
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

// serveTemplate sends a request for one template (DELETE /templates/{id})
// to every Ready node: a template is the fleet's. The first success
// answers; else the first refusal other than 404; else 404.
func (g *Gateway) serveTemplate(w http.ResponseWriter, r *http.Request) {
	ready, err := g.readyOrUnavailable(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	answers := g.fanOut(r.Context(), r, ready, r.Method, r.URL.RequestURI())
	var refusal, missing *answer
	for i := range answers {
		a := &answers[i]
		switch {
		case a.err != nil:
			if refusal == nil {
				refusal = a
			}
		case a.status/100 == 2:
			passAnswer(w, *a)
			return
		case a.status == http.StatusNotFound:
			if missing == nil {
				missing = a
			}
		case refusal == nil:
			refusal = a
		}
	}
	if refusal == nil {
		refusal = missing
	}
	if refusal.err != nil {
		writeError(w, refusal.err)
		return
	}
	passAnswer(w, *refusal)
}
