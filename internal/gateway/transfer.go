package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
)

// A create from a snapshot goes to the node holding it when that node can
// take it (placement's locality). When it cannot — full, drained — the
// snapshot is copied to the chosen node first: the holder's export
// (GET /snapshots/{id}/export, a checksummed btrfs send stream) streamed
// straight into the chosen node's import (POST /snapshots/import), with the
// caller's own key, so each node checks the team as for any call. The
// import is atomic and idempotent: a create retried after a failed copy
// copies again, and one after a finished copy finds the snapshot there.

// copySnapshot copies snapshot id from node from to node to.
func (g *Gateway) copySnapshot(ctx context.Context, r *http.Request, id string, from, to Node) error {
	exp, err := http.NewRequestWithContext(ctx, http.MethodGet, from.Endpoint+"/snapshots/"+url.PathEscape(id)+"/export", nil)
	if err != nil {
		return err
	}
	exp.Header = probeHeaders(r)
	// No overall timeout (g.http has one): a copy takes as long as the
	// snapshot is big; the caller's context bounds it.
	hc := &http.Client{Transport: g.http.Transport}
	res, err := hc.Do(exp)
	if err != nil {
		return fmt.Errorf("export snapshot %s from node %s: %v: %w", id, from.Name, err, errdefs.ErrUnavailable)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("export snapshot %s from node %s: %s: %w", id, from.Name, answerText(res), kindOfStatus(res.StatusCode))
	}
	imp, err := http.NewRequestWithContext(ctx, http.MethodPost, to.Endpoint+"/snapshots/import", res.Body)
	if err != nil {
		return err
	}
	imp.Header = probeHeaders(r)
	imp.Header.Set("Content-Type", "application/octet-stream")
	ires, err := hc.Do(imp)
	if err != nil {
		return fmt.Errorf("import snapshot %s on node %s: %v: %w", id, to.Name, err, errdefs.ErrUnavailable)
	}
	defer ires.Body.Close()
	if ires.StatusCode != http.StatusOK && ires.StatusCode != http.StatusCreated {
		return fmt.Errorf("import snapshot %s on node %s: %s: %w", id, to.Name, answerText(ires), kindOfStatus(ires.StatusCode))
	}
	g.log.Info("copied a snapshot for a create", "snapshot", id, "from", from.Name, "to", to.Name)
	return nil
}

// answerText is the start of a node's error answer, for an error message.
func answerText(res *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
	return strings.TrimSpace(res.Status + " " + string(b))
}

// kindOfStatus maps a node's error status back to an error kind, so the
// gateway answers the caller as the node would have.
func kindOfStatus(status int) error {
	switch status {
	case http.StatusNotFound:
		return errdefs.ErrNotFound
	case http.StatusUnauthorized:
		return errdefs.ErrUnauthenticated
	case http.StatusForbidden:
		return errdefs.ErrPermissionDenied
	case http.StatusBadRequest:
		return errdefs.ErrInvalid
	case http.StatusConflict:
		return errdefs.ErrConflict
	case http.StatusRequestEntityTooLarge, http.StatusInsufficientStorage, http.StatusTooManyRequests:
		return errdefs.ErrResourceExhausted
	default:
		return errdefs.ErrUnavailable
	}
}
