package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/warrenhq/warren/internal/accesstoken"
	"github.com/warrenhq/warren/internal/errdefs"
)

// A signed file URL (E2B's downloadUrl and uploadUrl) names its sandbox
// only in its Host, and not at all when E2B_SANDBOX_URL points every
// sandbox at one address. Such a URL goes to the node whose running sandbox
// signed it: each Ready node is asked (GET /signed-urls/owner, which only
// checks the signature) until one names the sandbox, and the request is
// then forwarded to that node with the sandbox named, where the signature
// is checked again as for any signed URL.

// serveSigned routes a signed /files URL that names no sandbox.
func (g *Gateway) serveSigned(w http.ResponseWriter, r *http.Request) {
	ready, err := g.readyOrUnavailable(r.Context())
	if err != nil {
		writePlaneError(w, r, "", err)
		return
	}
	q := r.URL.Query()
	op := "read"
	if r.Method == http.MethodPost {
		op = "write"
	}
	q.Set("operation", op)
	for _, n := range ready {
		id, err := g.signedOwner(r.Context(), n, q)
		if err != nil {
			if errors.Is(err, errdefs.ErrUnauthenticated) {
				writePlaneError(w, r, "", err)
				return
			}
			continue
		}
		g.memo.put(sandboxKey(id), n.Name)
		r.Header.Set("E2b-Sandbox-Id", id)
		g.forward(w, r, n, route{kind: routePlane, id: id}, nil)
		return
	}
	// It matches no running sandbox's file, operation and user on any node.
	writePlaneError(w, r, "", accesstoken.ErrBadSignature)
}

// signedOwner asks node n which of its sandboxes signed a URL with query q.
func (g *Gateway) signedOwner(ctx context.Context, n Node, q url.Values) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.Endpoint+"/signed-urls/owner?"+q.Encode(), nil)
	if err != nil {
		return "", err
	}
	res, err := g.http.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	switch res.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized:
		// The node's one 401: the signature verified, but has expired.
		return "", accesstoken.ErrExpired
	default:
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<16))
		return "", fmt.Errorf("node %s: %s: %w", n.Name, res.Status, errdefs.ErrNotFound)
	}
	var out struct {
		SandboxID string `json:"sandboxID"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<16)).Decode(&out); err != nil || out.SandboxID == "" {
		return "", fmt.Errorf("node %s answered no sandbox id: %w", n.Name, errdefs.ErrUnavailable)
	}
	return out.SandboxID, nil
}
