package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
)

// The checks of a request's credentials every route group shares: an API
// key through the authCache, the admin team.

type teamKey struct{}

func teamOf(r *http.Request) string { t, _ := r.Context().Value(teamKey{}).(string); return t }

// requireKey admits requests that carry a valid API key and records its team.
func (c *authCache) requireKey(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := apiKeyOf(r)
		if key == "" {
			writeError(w, r, fmt.Errorf("missing API key: send it in the X-API-Key header: %w", errdefs.ErrUnauthenticated))
			return
		}
		k, err := c.authenticate(r.Context(), key)
		if err != nil {
			if errdefs.IsNotFound(err) || errors.Is(err, errdefs.ErrUnauthenticated) {
				err = fmt.Errorf("invalid API key: %w", errdefs.ErrUnauthenticated)
			}
			writeError(w, r, err)
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), teamKey{}, k.Team)))
	})
}

// apiKeyOf is the request's API key: X-API-Key, or a Bearer Authorization.
func apiKeyOf(r *http.Request) string {
	if key := r.Header.Get("X-API-Key"); key != "" {
		return key
	}
	if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return b
	}
	return ""
}

// adminOnly admits only the admin team's keys; it runs behind requireKey.
func adminOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if teamOf(r) != AdminTeam {
			writeError(w, r, fmt.Errorf("only an admin key may do this: %w", errdefs.ErrPermissionDenied))
			return
		}
		h(w, r)
	}
}

// keyTeam is the team of the request's API key, "" when it has none or a
// bad one (the sandbox plane does not require a key).
func (c *authCache) keyTeam(r *http.Request) string {
	key := apiKeyOf(r)
	if key == "" {
		return ""
	}
	k, err := c.authenticate(r.Context(), key)
	if err != nil {
		return ""
	}
	return k.Team
}

// isAdmin says whether the request carries a valid admin key. An absent or
// bad key is no error here: health answers everyone.
func (c *authCache) isAdmin(r *http.Request) bool {
	key := apiKeyOf(r)
	if key == "" || c.keys == nil {
		return false
	}
	k, err := c.authenticate(r.Context(), key)
	return err == nil && k.Team == AdminTeam
}
