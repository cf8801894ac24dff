package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/kube/fleet"
)

// POST /sandboxes/{id}/move {"node": "<name>"} (admin keys only) moves a
// sandbox that is not running — or a running one with ?stop=true — to
// another node under the same id: the source's export (its files and
// record) is streamed into the target's adopt, and only once the target
// answered does the source forget its copy. A failure before that leaves
// the sandbox on the source; a retry after a failure past it finds the
// target's copy (adopt is idempotent by id) and forgets the source's again.
// The calls go with the caller's own admin key, which every node knows.

const headerMovedRecord = "X-Warren-Sandbox-Record"

// moveRequest is the body of a move; an empty node lets the gateway pick.
type moveRequest struct {
	Node string `json:"node"`
}

// moveAnswer is what a move answers: where the sandbox went, how long it took.
type moveAnswer struct {
	SandboxID string  `json:"sandboxID"`
	From      string  `json:"from"`
	To        string  `json:"to"`
	Seconds   float64 `json:"seconds"`
}

// isMovePath reports whether a request is POST /sandboxes/{id}/move.
func isMovePath(r *http.Request, id string) bool {
	return r.Method == http.MethodPost && (r.URL.Path == "/sandboxes/"+id+"/move" || r.URL.Path == "/v2/sandboxes/"+id+"/move")
}

func (g *Gateway) serveMove(w http.ResponseWriter, r *http.Request, id string, k key) {
	if k.team != adminTeam {
		writeError(w, fmt.Errorf("only an admin key may move sandboxes: %w", errdefs.ErrPermissionDenied))
		return
	}
	var in moveRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, maxCreateBody)).Decode(&in); err != nil && err != io.EOF {
		writeError(w, fmt.Errorf("the body is not a JSON move request ({\"node\":…}): %v: %w", err, errdefs.ErrInvalid))
		return
	}
	began := time.Now()
	from, to, err := g.moves.move(r.Context(), r, id, in.Node, r.URL.Query().Get("stop") == "true")
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, moveAnswer{SandboxID: id, From: from, To: to, Seconds: time.Since(began).Seconds()})
}

// mover moves sandboxes between nodes: the source's export streamed into
// the target's adopt, the Sandbox objects pointed at the target, then the
// source told to forget its copy.
type mover struct {
	fleet  fleetSource
	keys   *keyStore
	http   *http.Client
	memo   *memo
	log    *slog.Logger
	locate func(ctx context.Context, r *http.Request, id string, plane bool) (Node, error)
}

// move moves sandbox id to node target ("" = the gateway's choice).
func (m *mover) move(ctx context.Context, r *http.Request, id, target string, stop bool) (from, to string, err error) {
	src, err := m.locate(ctx, r, id, true)
	if err != nil {
		return "", "", err
	}
	dst, err := m.moveTarget(ctx, src, target)
	if err != nil {
		return "", "", err
	}
	q := url.Values{}
	if stop {
		q.Set("stop", "true")
	}
	hc := &http.Client{Transport: m.http.Transport} // a move takes as long as the files are big
	exp, err := m.nodeCall(ctx, r, hc, src, "/sandboxes/"+url.PathEscape(id)+"/export?"+q.Encode(), nil, nil)
	if err != nil {
		return "", "", fmt.Errorf("export sandbox %s from node %s: %w", id, src.Name, err)
	}
	defer exp.Body.Close()
	hdr := http.Header{headerMovedRecord: {exp.Header.Get(headerMovedRecord)}, "Content-Type": {"application/octet-stream"}}
	adopt, err := m.nodeCall(ctx, r, hc, dst, "/sandboxes/adopt?from="+url.QueryEscape(src.Name), exp.Body, hdr)
	if err != nil {
		return "", "", fmt.Errorf("adopt sandbox %s on node %s (it stays on node %s): %w", id, dst.Name, src.Name, err)
	}
	_ = adopt.Body.Close()
	m.memo.put(sandboxKey(id), dst.Name)
	m.repoint(ctx, id, dst.Name)
	// A source that answers not found has forgotten already: its own sync
	// sees the repointed object and destroys its copy as a forget does.
	forget, err := m.nodeCall(ctx, r, hc, src, "/sandboxes/"+url.PathEscape(id)+"/forget", nil, nil)
	if err != nil && !errdefs.IsNotFound(err) {
		return "", "", fmt.Errorf("sandbox %s is on node %s now, but node %s did not forget its copy (move it again to retry): %w", id, dst.Name, src.Name, err)
	}
	if forget != nil {
		_ = forget.Body.Close()
	}
	m.log.Info("moved a sandbox", "sandbox", id, "from", src.Name, "to", dst.Name)
	return src.Name, dst.Name, nil
}

// moveTarget is the node a move goes to: the one named, else the Ready,
// schedulable node other than the source with the most free memory.
func (m *mover) moveTarget(ctx context.Context, src Node, name string) (Node, error) {
	if name == src.Name {
		return Node{}, fmt.Errorf("the sandbox is on node %s already; name another node: %w", name, errdefs.ErrInvalid)
	}
	nodes, err := m.fleet.Nodes(ctx)
	if err != nil {
		return Node{}, err
	}
	var best *Node
	for i, n := range nodes {
		switch {
		case name != "" && n.Name == name:
			if !n.Ready {
				return Node{}, fmt.Errorf("node %s is not Ready: %w", name, errdefs.ErrConflict)
			}
			return n, nil
		case name == "" && n.Ready && !n.Unschedulable && n.Name != src.Name:
			if best == nil || n.FreeMemory > best.FreeMemory {
				best = &nodes[i]
			}
		}
	}
	if name != "" {
		return Node{}, fmt.Errorf("node %s: the fleet has no such node (no WarrenNode): %w", name, errdefs.ErrNotFound)
	}
	if best == nil {
		return Node{}, fmt.Errorf("no other Ready, schedulable node to move to: %w", errdefs.ErrResourceExhausted)
	}
	return *best, nil
}

// nodeCall POSTs to a node with the caller's key and returns a 2xx answer
// (the caller closes its body); any other answer is an error of its kind.
func (m *mover) nodeCall(ctx context.Context, r *http.Request, hc *http.Client, n Node, path string, body io.Reader, hdr http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.Endpoint+path, body)
	if err != nil {
		return nil, err
	}
	req.Header = probeHeaders(r)
	for k, v := range hdr {
		req.Header[k] = v
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("node %s: %v: %w", n.Name, err, errdefs.ErrUnavailable)
	}
	if res.StatusCode/100 != 2 {
		defer res.Body.Close()
		return nil, fmt.Errorf("node %s: %s: %w", n.Name, answerText(res), kindOfStatus(res.StatusCode))
	}
	return res, nil
}

// repoint gives the Sandbox objects of a moved sandbox the target as their
// node before the source forgets it: the source then no longer counts them
// as its own (it would delete them, a kubectl-made one included, whose
// sandbox the target would then kill as orphaned), and the target finds
// them and publishes its status into them. A failure is logged: an
// object the API made is made again by the target once the source let go.
func (m *mover) repoint(ctx context.Context, id, node string) {
	if m.keys == nil || m.keys.api == nil {
		return
	}
	var objs warrenv1.SandboxList
	if err := m.keys.api.List(ctx, &objs, client.InNamespace(m.keys.namespace), client.MatchingLabels{fleet.LabelSandboxID: id}); err != nil {
		m.log.Warn("list the Sandbox objects of a moved sandbox", "sandbox", id, "err", err)
		return
	}
	for i := range objs.Items {
		o := &objs.Items[i]
		before := o.DeepCopy()
		o.Spec.NodeName = node
		if err := m.keys.api.Patch(ctx, o, client.MergeFrom(before)); err != nil {
			m.log.Warn("point a moved sandbox's object at its new node", "sandbox", id, "object", o.Name, "err", err)
		}
	}
}

// currentNode is the node sandbox id's objects point at in the API server
// now, when one points elsewhere than lost (a restore's repoint); "" when
// none does or the read fails.
func (m *mover) currentNode(ctx context.Context, id, lost string) string {
	if m == nil || m.keys == nil || m.keys.api == nil {
		return ""
	}
	var objs warrenv1.SandboxList
	if err := m.keys.api.List(ctx, &objs, client.InNamespace(m.keys.namespace), client.MatchingLabels{fleet.LabelSandboxID: id}); err != nil {
		m.log.Warn("read the Sandbox objects of a Lost sandbox", "sandbox", id, "err", err)
		return ""
	}
	for _, o := range objs.Items {
		if n := o.Spec.NodeName; n != "" && n != lost {
			return n
		}
	}
	return ""
}

// fleetMover moves sandboxes off their node for the controller's drains,
// as warren node drain does through the gateway: the mover's own path,
// with the fleet's admin key (a drain has no caller).
type fleetMover struct {
	keys  *keyStore
	moves *mover
}

// MoveOff moves sandbox id off its node to the node the gateway picks,
// stopping it first when it runs (which its node turns into a hibernation
// where the runtime saves memory).
func (f fleetMover) MoveOff(ctx context.Context, id string) (to string, err error) {
	key, err := f.keys.fleetKey(ctx)
	if err != nil {
		return "", err
	}
	asFleet := &http.Request{Header: http.Header{"X-Api-Key": {key}}}
	_, to, err = f.moves.move(ctx, asFleet, id, "", true)
	return to, err
}
