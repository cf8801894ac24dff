package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	wapi "github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
)

// serveKeys serves /api-keys from Secrets, admin keys only, in the node's
// shapes: POST answers 201 with the key's plaintext once, GET lists
// without secrets, DELETE answers 204.
func (g *Gateway) serveKeys(w http.ResponseWriter, r *http.Request, rt route, k key) {
	if k.team != adminTeam {
		writeError(w, fmt.Errorf("only an admin key may do this: %w", errdefs.ErrPermissionDenied))
		return
	}
	switch {
	case rt.id == "" && r.Method == http.MethodPost:
		var in wapi.NewAPIKey
		if err := json.NewDecoder(io.LimitReader(r.Body, maxCreateBody)).Decode(&in); err != nil && err != io.EOF {
			writeError(w, fmt.Errorf("the body is not a JSON key request ({\"team\":…,\"name\":…}): %v: %w", err, errdefs.ErrInvalid))
			return
		}
		out, err := g.keys.create(r.Context(), in.Team, in.Name)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, out)
	case rt.id == "" && r.Method == http.MethodGet:
		out, err := g.keys.list(r.Context(), r.URL.Query().Get("team"))
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	case rt.id != "" && r.Method == http.MethodDelete:
		if err := g.keys.revoke(r.Context(), rt.id); err != nil {
			writeError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		writeJSON(w, http.StatusMethodNotAllowed, wapi.Error{Code: http.StatusMethodNotAllowed, Message: fmt.Sprintf("%s %s: /api-keys takes GET and POST, /api-keys/{id} DELETE", r.Method, r.URL.Path)})
	}
}
