package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// SecretsService manages the team's secrets (the /secrets routes, E2B's).
// Values are write-only: no answer carries one. A sandbox uses a secret
// through its placeholder, ${e2b.secrets.<name>}, in a network rule's
// header or in a request's header; the daemon's egress proxy puts the
// value in for the hosts the secret allows.
type SecretsService struct{ t *transport }

// Secret is a secret's metadata (never its value).
type Secret struct {
	SecretID       string            `json:"secretID"`
	Name           string            `json:"name"`
	CurrentVersion int               `json:"currentVersion"`
	Metadata       map[string]string `json:"metadata"`
	// AllowedHosts are the domain patterns the value may be sent to
	// (warren's extension); empty: any host the sandbox's rules name.
	AllowedHosts []string  `json:"allowedHosts"`
	CreatedAt    time.Time `json:"createdAt"`
	UpdatedAt    time.Time `json:"updatedAt"`
}

// NewSecret is the body of a create.
type NewSecret struct {
	Name         string            `json:"name"`
	Value        string            `json:"value"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	AllowedHosts []string          `json:"allowedHosts,omitempty"`
}

// SecretUpdate stores a new version; nil Metadata or AllowedHosts keep the
// stored ones.
type SecretUpdate struct {
	Value        string            `json:"value"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	AllowedHosts []string          `json:"allowedHosts,omitempty"`
}

// Placeholder is the text that stands for secret name's value.
func Placeholder(name string) string { return "${e2b.secrets." + name + "}" }

// Create stores a new secret (version 1).
func (s *SecretsService) Create(ctx context.Context, in NewSecret) (Secret, error) {
	var out Secret
	r, err := jsonBody(http.MethodPost, "/secrets", in)
	if err != nil {
		return out, err
	}
	err = s.t.call(ctx, r, &out)
	return out, err
}

// Update stores a new version of a secret (by id or name).
func (s *SecretsService) Update(ctx context.Context, ref string, in SecretUpdate) (Secret, error) {
	var out Secret
	r, err := jsonBody(http.MethodPost, "/secrets/"+url.PathEscape(ref), in)
	if err != nil {
		return out, err
	}
	err = s.t.call(ctx, r, &out)
	return out, err
}

// Get returns a secret's metadata by id or name.
func (s *SecretsService) Get(ctx context.Context, ref string) (Secret, error) {
	var out Secret
	err := s.t.call(ctx, request{method: http.MethodGet, path: "/secrets/" + url.PathEscape(ref)}, &out)
	return out, err
}

// List returns one page of secrets by name and the token of the next page
// ("" after the last).
func (s *SecretsService) List(ctx context.Context, limit int, nextToken string) ([]Secret, string, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if nextToken != "" {
		q.Set("nextToken", nextToken)
	}
	resp, err := s.t.send(ctx, request{method: http.MethodGet, path: "/secrets", query: q})
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	var out []Secret
	if err := decodeJSON(resp, &out); err != nil {
		return nil, "", err
	}
	return out, resp.Header.Get("X-Next-Token"), nil
}

// Delete removes a secret and every version of it.
func (s *SecretsService) Delete(ctx context.Context, ref string) error {
	return s.t.call(ctx, request{method: http.MethodDelete, path: "/secrets/" + url.PathEscape(ref)}, nil)
}
