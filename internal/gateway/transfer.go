package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/kube/fleet"
)

// A create from a snapshot goes to the node holding it when that node can
// take it (placement's locality). When it cannot — full, drained — the
// chosen node pulls the snapshot from the holder first (POST
// /snapshots/pull): it reads the holder's export itself, node to node,
// with the fleet's admin key, and records the snapshot under the caller's
// team. Nothing passes through the gateway. A pull whose stream broke
// continues from where it stopped when asked again, which the copy does a
// few times before it gives up; the import is atomic and idempotent, so a
// create retried after a failed copy pulls again, and one after a
// finished copy finds the snapshot there.

// pullAttempts is how many times a copy asks for a pull whose stream broke
// (each continues the one before).
const pullAttempts = 3

// copySnapshot makes node to pull snapshot id of team from node from.
func (g *Gateway) copySnapshot(ctx context.Context, team, id string, from, to Node) error {
	key, err := g.keys.fleetKey(ctx)
	if err != nil {
		return err
	}
	body, err := json.Marshal(map[string]string{"from": from.Endpoint, "snapshot": id, "team": team})
	if err != nil {
		return err
	}
	// No overall timeout (g.http has one): a copy takes as long as the
	// snapshot is big; the caller's context bounds it.
	hc := &http.Client{Transport: g.http.Transport}
	for attempt := 1; ; attempt++ {
		err = g.pullOnce(ctx, hc, key, body, to)
		if err == nil {
			g.log.Info("a node pulled a snapshot for a create", "snapshot", id, "from", from.Name, "to", to.Name, "attempts", attempt)
			return nil
		}
		if !errors.Is(err, errdefs.ErrUnavailable) || attempt == pullAttempts || ctx.Err() != nil {
			return fmt.Errorf("node %s pulling snapshot %s from node %s: %w", to.Name, id, from.Name, err)
		}
		g.log.Warn("a snapshot pull broke off; continuing it", "snapshot", id, "to", to.Name, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
		}
	}
}

// pullOnce asks node to to pull once.
func (g *Gateway) pullOnce(ctx context.Context, hc *http.Client, key string, body []byte, to Node) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, to.Endpoint+"/snapshots/pull", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("X-API-Key", key)
	req.Header.Set("Content-Type", "application/json")
	res, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%v: %w", err, errdefs.ErrUnavailable)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK && res.StatusCode != http.StatusCreated {
		return fmt.Errorf("%s: %w", answerText(res), kindOfStatus(res.StatusCode))
	}
	return nil
}

// fleetKey reads the fleet's admin key from its Secret.
func (s *keyStore) fleetKey(ctx context.Context) (string, error) {
	var sec corev1.Secret
	if err := s.cache.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: fleet.FleetAdminSecret}, &sec); err != nil {
		return "", fmt.Errorf("the fleet's admin key (Secret %s/%s): %w", s.namespace, fleet.FleetAdminSecret, kubeErr(err))
	}
	key := string(sec.Data[fleet.KeyDataKey])
	if key == "" {
		return "", fmt.Errorf("the Secret %s/%s holds no %q: %w", s.namespace, fleet.FleetAdminSecret, fleet.KeyDataKey, errdefs.ErrUnavailable)
	}
	return key, nil
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
	case http.StatusNotImplemented:
		return errdefs.ErrUnsupported
	default:
		return errdefs.ErrUnavailable
	}
}
