package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/store"
)

// Moving a sandbox between the nodes of a fleet (the gateway's
// POST /sandboxes/{id}/move drives it): the source's export answers with
// the bundle of the sandbox's files and its record in a header, which the
// gateway streams into the target's adopt; then the source forgets it.
// All three are for the fleet's admin key: they act on any team's sandbox.

// headerMovedRecord carries a moved sandbox's record (base64url of its
// JSON, a format between nodes of one version, not a public one).
const headerMovedRecord = "X-Warren-Sandbox-Record"

// Mover is what the move routes need of the session service.
type Mover interface {
	MoveOut(ctx context.Context, id string, stop bool) (store.Sandbox, store.Snapshot, error)
	Adopt(ctx context.Context, req session.AdoptRequest) (store.Sandbox, bool, error)
	Forget(ctx context.Context, id string) error
}

var _ Mover = (*session.Manager)(nil)

type moveRoutes struct {
	sandboxViews
	mover     Mover
	snapshots *snapshotRoutes
}

// exportSandbox (POST /sandboxes/{id}/export[?stop=true]) snapshots a
// sandbox's files and streams them with its record.
func (s *moveRoutes) exportSandbox(w http.ResponseWriter, r *http.Request) {
	if s.mover == nil {
		writeError(w, r, fmt.Errorf("moving sandboxes: %w", errdefs.ErrUnsupported))
		return
	}
	rec, snap, err := s.mover.MoveOut(r.Context(), r.PathValue("id"), r.URL.Query().Get("stop") == "true")
	if err != nil {
		writeError(w, r, err)
		return
	}
	b, err := json.Marshal(rec)
	if err != nil {
		writeError(w, r, err)
		return
	}
	w.Header().Set(headerMovedRecord, base64.RawURLEncoding.EncodeToString(b))
	s.snapshots.streamExport(w, r, exportRange{team: rec.Team, id: snap.ID})
}

// adoptSandbox (POST /sandboxes/adopt?from=NODE) takes a sandbox exported
// by another node: the bundle in the body, its record in the header.
func (s *moveRoutes) adoptSandbox(w http.ResponseWriter, r *http.Request) {
	if s.mover == nil {
		writeError(w, r, fmt.Errorf("moving sandboxes: %w", errdefs.ErrUnsupported))
		return
	}
	var rec store.Sandbox
	raw, err := base64.RawURLEncoding.DecodeString(r.Header.Get(headerMovedRecord))
	if err == nil {
		err = json.Unmarshal(raw, &rec)
	}
	if err == nil {
		err = ids.ValidateName("team", rec.Team)
	}
	if err != nil || rec.ID == "" {
		writeError(w, r, fmt.Errorf("header %s must hold the moved sandbox's record, as the source's export gave it: %w", headerMovedRecord, errdefs.ErrInvalid))
		return
	}
	snap, _, ok := s.snapshots.importBundle(w, r, rec.Team)
	if !ok {
		return
	}
	got, adopted, err := s.mover.Adopt(r.Context(), session.AdoptRequest{Record: rec, Snapshot: snap.ID, From: r.URL.Query().Get("from")})
	if err != nil {
		writeError(w, r, err)
		return
	}
	status := http.StatusCreated
	if !adopted {
		status = http.StatusOK
	}
	writeJSON(w, status, s.sandboxOf(got))
}

// forgetSandbox (POST /sandboxes/{id}/forget) destroys a sandbox that has
// moved away, with the snapshots its moves took.
func (s *moveRoutes) forgetSandbox(w http.ResponseWriter, r *http.Request) {
	if s.mover == nil {
		writeError(w, r, fmt.Errorf("moving sandboxes: %w", errdefs.ErrUnsupported))
		return
	}
	if err := s.mover.Forget(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// moveHere (POST /sandboxes/{id}/move) is the gateway's route: a node
// alone cannot move its sandboxes, it needs the gateway to pick and reach
// the target.
func (s *moveRoutes) moveHere(w http.ResponseWriter, r *http.Request) {
	writeError(w, r, fmt.Errorf("moving a sandbox is done by a fleet's gateway (warren gateway), not by a node: send this request to the gateway: %w", errdefs.ErrUnsupported))
}
