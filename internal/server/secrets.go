package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/secrets"
	"github.com/warrenhq/warren/internal/store"
)

// Secrets is the secrets service (internal/secrets) as the API uses it.
type Secrets interface {
	Create(ctx context.Context, team string, n secrets.New) (store.Secret, error)
	Update(ctx context.Context, team, ref string, u secrets.Update) (store.Secret, error)
	Get(ctx context.Context, team, ref string) (store.Secret, error)
	List(ctx context.Context, team, after string, limit int) ([]store.Secret, error)
	Delete(ctx context.Context, team, ref string) (store.Secret, error)
}

// secretRoutes serve /secrets (E2B's): values go in, never out.
type secretRoutes struct {
	secrets Secrets
}

// routes registers /secrets.
func (s *secretRoutes) routes(m *routeMux, auth func(http.HandlerFunc) http.Handler) {
	m.Handle("POST /secrets", auth(s.create))
	m.Handle("GET /secrets", auth(s.list))
	m.Handle("GET /secrets/{ref}", auth(s.get))
	m.Handle("POST /secrets/{ref}", auth(s.update))
	m.Handle("DELETE /secrets/{ref}", auth(s.remove))
}

// maxSecretBody leaves room for a value at its bound and metadata, so that
// an over-long value is told as such rather than as an over-long body.
const maxSecretBody = 2 << 20

// secretBody is a create's or an update's body.
type secretBody struct {
	Name         string            `json:"name"`
	Value        *string           `json:"value"`
	Metadata     map[string]string `json:"metadata"`
	AllowedHosts []string          `json:"allowedHosts"`
}

// decodeSecret reads a body whose errors must never quote it (the value
// is in it).
func decodeSecret(w http.ResponseWriter, r *http.Request, into *secretBody) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxSecretBody)
	if err := json.NewDecoder(r.Body).Decode(into); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return fmt.Errorf("request body is larger than %d bytes (a secret's value is at most %d): %w", tooBig.Limit, secrets.MaxValueLen, errTooLarge)
		}
		return fmt.Errorf("request body is not a JSON object {name, value, metadata?, allowedHosts?} of strings: %w", errdefs.ErrInvalid)
	}
	if into.Value == nil {
		return fmt.Errorf("value is missing: %w", errdefs.ErrInvalid)
	}
	return nil
}

func secretOf(s store.Secret) client.Secret {
	out := client.Secret{SecretID: s.ID, Name: s.Name, CurrentVersion: s.Version, Metadata: s.Metadata, AllowedHosts: s.AllowedHosts,
		CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	if out.AllowedHosts == nil {
		out.AllowedHosts = []string{}
	}
	return out
}

func (s *secretRoutes) available(w http.ResponseWriter, r *http.Request) bool {
	if s.secrets == nil {
		writeError(w, r, fmt.Errorf("this server keeps no secrets: %w", errdefs.ErrUnsupported))
		return false
	}
	return true
}

// create serves POST /secrets.
func (s *secretRoutes) create(w http.ResponseWriter, r *http.Request) {
	if !s.available(w, r) {
		return
	}
	var body secretBody
	if err := decodeSecret(w, r, &body); err != nil {
		writeError(w, r, err)
		return
	}
	rec, err := s.secrets.Create(r.Context(), teamOf(r), secrets.New{Name: body.Name, Value: secrets.NewValue(*body.Value),
		Metadata: body.Metadata, AllowedHosts: body.AllowedHosts})
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, secretOf(rec))
}

// update serves POST /secrets/{ref}: a new version.
func (s *secretRoutes) update(w http.ResponseWriter, r *http.Request) {
	if !s.available(w, r) {
		return
	}
	var body secretBody
	if err := decodeSecret(w, r, &body); err != nil {
		writeError(w, r, err)
		return
	}
	rec, err := s.secrets.Update(r.Context(), teamOf(r), r.PathValue("ref"), secrets.Update{Value: secrets.NewValue(*body.Value),
		Metadata: body.Metadata, AllowedHosts: body.AllowedHosts})
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, secretOf(rec))
}

// get serves GET /secrets/{ref}.
func (s *secretRoutes) get(w http.ResponseWriter, r *http.Request) {
	if !s.available(w, r) {
		return
	}
	rec, err := s.secrets.Get(r.Context(), teamOf(r), r.PathValue("ref"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, secretOf(rec))
}

// list serves GET /secrets?limit=&nextToken=: by name.
func (s *secretRoutes) list(w http.ResponseWriter, r *http.Request) {
	if !s.available(w, r) {
		return
	}
	limit, err := pageLimit(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	team, after := teamOf(r), r.URL.Query().Get("nextToken")
	writePage(w, r, limit, func(n int) ([]store.Secret, error) {
		return s.secrets.List(r.Context(), team, after, n)
	}, secretOf)
}

// remove serves DELETE /secrets/{ref}.
func (s *secretRoutes) remove(w http.ResponseWriter, r *http.Request) {
	if !s.available(w, r) {
		return
	}
	if _, err := s.secrets.Delete(r.Context(), teamOf(r), r.PathValue("ref")); err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
