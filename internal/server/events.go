package server

import (
	"net/http"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/store"
)

func eventOfRecord(e store.Event) client.SandboxEvent {
	return client.SandboxEvent{ID: e.ID, At: e.At, Kind: e.Kind, From: string(e.From), To: string(e.To), Cause: e.Cause, Detail: e.Detail}
}

// sandboxEvents serves GET /sandboxes/{id}/events?after=&limit=: the
// sandbox's lifecycle history, oldest first; `after` resumes from an id.
func (s *sandboxRoutes) sandboxEvents(w http.ResponseWriter, r *http.Request) {
	after, err := afterParam(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	limit, err := pageLimit(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	evs, err := s.records.Events(r.Context(), teamOf(r), r.PathValue("id"), after, limit)
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := make([]client.SandboxEvent, 0, len(evs))
	for _, e := range evs {
		out = append(out, eventOfRecord(e))
	}
	writeJSON(w, http.StatusOK, out)
}
