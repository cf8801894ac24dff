package server

import (
	"net/http"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/store"
	"github.com/warrenhq/warren/internal/tplbuild"
)

// adminRoutes serve templates and API keys.
type adminRoutes struct {
	templates Templates
	keys      Keys
	authz     *authCache
	// built lists the team's templates built from steps.
	built *templateBuildRoutes
}

func (s *adminRoutes) listTemplates(w http.ResponseWriter, r *http.Request) {
	ts, err := s.templates.List(r.Context())
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := make([]client.Template, 0, len(ts))
	for _, t := range ts {
		if tplbuild.IsImageTemplate(t.Name) && !s.authz.isAdmin(r) {
			continue // a team's private pull (fromImage builds): the admin's to see
		}
		out = append(out, client.Template{TemplateID: t.Name, Source: t.Source, CreatedAt: t.CreatedAt, SizeBytes: t.SizeBytes, Runtime: t.Runtime, NoNewPrivileges: t.NoNewPrivileges, Devices: t.Devices})
	}
	built, err := s.built.listed(r.Context(), teamOf(r))
	if err != nil {
		writeError(w, r, err)
		return
	}
	out = append(out, built...)
	writeJSON(w, http.StatusOK, out)
}

func (s *adminRoutes) deleteTemplate(w http.ResponseWriter, r *http.Request) {
	if err := s.templates.Delete(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func keyOf(k store.APIKey) client.APIKey {
	out := client.APIKey{ID: k.ID, Team: k.Team, Name: k.Name, Prefix: k.Prefix, CreatedAt: k.CreatedAt, Revoked: k.Revoked}
	if !k.LastUsedAt.IsZero() {
		t := k.LastUsedAt
		out.LastUsedAt = &t
	}
	return out
}

func (s *adminRoutes) createKey(w http.ResponseWriter, r *http.Request) {
	var body client.NewAPIKey
	if err := decodeJSON(w, r, &body); err != nil {
		writeError(w, r, err)
		return
	}
	plain, k, err := s.keys.CreateAPIKey(r.Context(), body.Team, body.Name)
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := keyOf(k)
	out.Key = plain
	writeJSON(w, http.StatusCreated, out)
}

func (s *adminRoutes) listKeys(w http.ResponseWriter, r *http.Request) {
	ks, err := s.keys.ListAPIKeys(r.Context(), r.URL.Query().Get("team"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := make([]client.APIKey, 0, len(ks))
	for _, k := range ks {
		out = append(out, keyOf(k))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *adminRoutes) revokeKey(w http.ResponseWriter, r *http.Request) {
	if err := s.keys.RevokeAPIKey(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, r, err)
		return
	}
	s.authz.forget()
	w.WriteHeader(http.StatusNoContent)
}
