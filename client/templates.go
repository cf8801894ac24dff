package client

import (
	"context"
	"net/http"
	"net/url"
)

// TemplatesService lists and deletes templates (GET /templates).
type TemplatesService struct{ t *transport }

// List lists the templates sandboxes can start from.
func (s *TemplatesService) List(ctx context.Context) ([]Template, error) {
	var out []Template
	err := s.t.call(ctx, request{method: http.MethodGet, path: "/templates"}, &out)
	return out, err
}

// Delete removes a template.
func (s *TemplatesService) Delete(ctx context.Context, name string) error {
	return s.t.call(ctx, request{method: http.MethodDelete, path: "/templates/" + url.PathEscape(name)}, nil)
}

// Get answers one of the team's templates built from steps (by id, name
// or name:tag) with its builds.
func (s *TemplatesService) Get(ctx context.Context, ref string) (TemplateDetail, error) {
	var out TemplateDetail
	err := s.t.call(ctx, request{method: http.MethodGet, path: "/templates/" + url.PathEscape(ref)}, &out)
	return out, err
}
