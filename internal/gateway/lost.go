package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	wapi "github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/kube/fleet"
)

// A sandbox whose node was lost (its object's phase Lost) is restored on
// demand: a connect or resume through the gateway makes it again on the
// node holding its replica (POST /sandboxes/{id}/restore there, as a
// move's adopt), points its objects at that node, and then forwards the
// connect itself there, which resumes it and answers as a connect does.
// Anything else about a Lost sandbox is answered here: its record (GET)
// with state "lost", or a 502 (as for any sandbox whose node is not Ready) that says what happened and what to do. A
// Lost sandbox no other node holds a copy of is never dropped silently: a
// connect is a 409, and every call says that it comes back only with its
// node.

// stateLost is the state a Lost sandbox's record shows.
const stateLost = "lost"

// serveLost answers a request about a Lost sandbox; false lets the
// request take its usual way (the key's team does not own it, or it was
// restored through this gateway and the memo knows where).
func (g *Gateway) serveLost(w http.ResponseWriter, r *http.Request, rt route, k key, lost *warrenv1.Sandbox) bool {
	if k.team != adminTeam && k.team != teamOfSandbox(lost) {
		return false
	}
	if name, ok := g.memo.get(sandboxKey(rt.id)); ok && name != lost.Status.Node {
		return false
	}
	switch {
	case g.restores.restoredElsewhere(r.Context(), rt.id, lost):
		// Another gateway restored it; this one's cache has not caught up.
		return false
	case isRestorePath(r, rt.id):
		began := time.Now()
		node, err := g.restores.restore(r.Context(), rt.id, lost)
		if err != nil {
			writeError(w, err)
			return true
		}
		g.log.Info("restored a lost sandbox from its replica", "sandbox", rt.id, "lost", lost.Status.Node, "on", node.Name, "took", time.Since(began))
		g.forward(w, r, node, rt, nil)
	case r.Method == http.MethodGet && isRecordPath(r.URL.Path, rt.id):
		writeJSON(w, http.StatusOK, lostRecord(rt.id, lost))
	default:
		// Unavailable, as any call to a sandbox whose node is not Ready:
		// it may come back.
		writeError(w, fmt.Errorf("%s: %w", lostMessage(rt.id, lost), errdefs.ErrUnavailable))
	}
	return true
}

// restoredElsewhere reports whether a sandbox this gateway's cache shows
// Lost was restored through another gateway, which points its objects at
// the new node before that node reports the sandbox running: the cached
// object, else a read of the API server (only on this rare path), names
// another node. The memo then routes to it.
func (rs *restorer) restoredElsewhere(ctx context.Context, id string, lost *warrenv1.Sandbox) bool {
	if rs == nil {
		return false
	}
	node := lost.Spec.NodeName
	if node == "" || node == lost.Status.Node {
		node = rs.moves.currentNode(ctx, id, lost.Status.Node)
	}
	if node == "" || node == lost.Status.Node {
		return false
	}
	rs.memo.put(sandboxKey(id), node)
	return true
}

// restorer makes Lost sandboxes again from their replicas, one restore of
// a sandbox at a time in a gateway: the connects that arrive meanwhile
// wait for it and share its outcome (the node's adopt would answer them a
// conflict while it makes the sandbox).
type restorer struct {
	owner func(ctx context.Context, name, what string) (Node, error)
	keys  *keyStore
	moves *mover
	http  *http.Client
	memo  *memo

	mu    sync.Mutex
	calls map[string]*restoreCall
}

type restoreCall struct {
	done chan struct{}
	node Node
	err  error
}

// restore makes sandbox id again on the node holding its replica, or
// waits for the restore of it under way.
func (rs *restorer) restore(ctx context.Context, id string, lost *warrenv1.Sandbox) (Node, error) {
	rs.mu.Lock()
	if c, ok := rs.calls[id]; ok {
		rs.mu.Unlock()
		select {
		case <-c.done:
			return c.node, c.err
		case <-ctx.Done():
			return Node{}, ctx.Err()
		}
	}
	c := &restoreCall{done: make(chan struct{})}
	if rs.calls == nil {
		rs.calls = map[string]*restoreCall{}
	}
	rs.calls[id] = c
	rs.mu.Unlock()
	c.node, c.err = rs.restoreOnce(context.WithoutCancel(ctx), id, lost)
	rs.mu.Lock()
	delete(rs.calls, id)
	rs.mu.Unlock()
	close(c.done)
	return c.node, c.err
}

// restoreOnce asks the replica's node to adopt the sandbox from its copy
// and points the sandbox's objects and the memo there.
func (rs *restorer) restoreOnce(ctx context.Context, id string, lost *warrenv1.Sandbox) (Node, error) {
	rep := lost.Status.Replica
	if rep == nil || rep.Node == lost.Status.Node {
		return Node{}, fmt.Errorf("%s: %w", lostMessage(id, lost), errdefs.ErrConflict)
	}
	node, err := rs.owner(ctx, rep.Node, "the replica of sandbox "+id)
	if err != nil {
		return Node{}, fmt.Errorf("sandbox %s is Lost with node %s, and cannot be restored now: %w", id, lost.Status.Node, err)
	}
	key, err := rs.keys.fleetKey(ctx)
	if err != nil {
		return Node{}, err
	}
	q := url.Values{"snapshot": {rep.Snapshot}, "from": {lost.Status.Node}}
	hdr := http.Header{"X-Api-Key": {key}}
	// With the fleet's key alone: the caller's is not an admin key.
	noCaller := &http.Request{Header: http.Header{}}
	res, err := rs.moves.nodeCall(ctx, noCaller, rs.http, node, "/sandboxes/"+url.PathEscape(id)+"/restore?"+q.Encode(), nil, hdr)
	if err != nil {
		return Node{}, fmt.Errorf("restore sandbox %s on node %s from its replica: %w", id, node.Name, err)
	}
	_ = res.Body.Close()
	rs.memo.put(sandboxKey(id), node.Name)
	rs.moves.repoint(ctx, id, node.Name)
	return node, nil
}

// lostMessage says what became of a Lost sandbox and what can be done.
func lostMessage(id string, lost *warrenv1.Sandbox) string {
	msg := fmt.Sprintf("sandbox %s is Lost: its node %s stopped renewing its Lease", id, lost.Status.Node)
	if rep := lost.Status.Replica; rep != nil && rep.Node != lost.Status.Node {
		return fmt.Sprintf("%s; connect to it (POST /sandboxes/%s/connect) to restore it on node %s from its copy of %s (what it did after that is lost)",
			msg, id, rep.Node, rep.At.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("%s, and no other node holds a copy of it: it comes back only if node %s does", msg, lost.Status.Node)
}

// lostRecord is what GET /sandboxes/{id} answers for a Lost sandbox.
func lostRecord(id string, lost *warrenv1.Sandbox) wapi.SandboxDetail {
	d := wapi.SandboxDetail{Sandbox: wapi.Sandbox{SandboxID: id, TemplateID: lost.Spec.Template}, State: stateLost, Metadata: lost.Spec.Metadata, Node: lost.Status.Node}
	// An object made before its node reported a start has none: its
	// creation orders it in lists instead of the zero time.
	d.StartedAt = lost.CreationTimestamp.Time
	if lost.Status.StartedAt != nil {
		d.StartedAt = lost.Status.StartedAt.Time
	}
	return d
}

// teamOfSandbox is the team of a Sandbox object's sandbox.
func teamOfSandbox(sb *warrenv1.Sandbox) string {
	if t := sb.Labels[fleet.LabelTeam]; t != "" {
		return t
	}
	return adminTeam
}

// isRestorePath: a POST that resumes a sandbox (E2B's connect and resume,
// warren's resume), which restores a Lost one.
func isRestorePath(r *http.Request, id string) bool {
	if r.Method != http.MethodPost {
		return false
	}
	rest, ok := strings.CutPrefix(strings.TrimPrefix(r.URL.Path, "/v2"), "/sandboxes/"+id+"/")
	return ok && (rest == "connect" || rest == "resume")
}

// isRecordPath: the path of a sandbox's record.
func isRecordPath(path, id string) bool {
	return strings.TrimPrefix(path, "/v2") == "/sandboxes/"+id
}
