package server

import (
	"net/http"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/store"
	"github.com/warrenhq/warren/internal/tplbuild"
)

// show serves GET /templates/{id}: one of the team's built
// templates (by id, name or name:tag) with its builds, their status,
// cache hits, duration and parent.
func (s *templateBuildRoutes) show(w http.ResponseWriter, r *http.Request) {
	if !s.available(w, r) {
		return
	}
	d, err := s.builds.Show(r.Context(), teamOf(r), r.PathValue("id"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := client.TemplateDetail{Template: builtTemplateOf(d.Summary), Builds: make([]client.TemplateBuild, 0, len(d.Builds))}
	for _, b := range d.Builds {
		out.Builds = append(out.Builds, templateBuildOf(b, d.BuildTags[b.ID]))
	}
	writeJSON(w, http.StatusOK, out)
}

// builtTemplateOf is a built template as GET /templates lists it, beside
// the server's own: E2B's list names a template's id, its alias, its last
// build and that build's status; warren adds the cache hits and chain.
func builtTemplateOf(t tplbuild.Summary) client.Template {
	return client.Template{TemplateID: t.ID, Source: "build", CreatedAt: t.CreatedAt,
		Aliases: []string{t.Name}, Names: []string{t.Name}, Tags: t.Tags, BuildID: t.LastBuildID,
		BuildStatus: t.LastStatus, BuildCount: t.Builds, CachedSteps: t.CachedSteps, Steps: t.Steps, Chain: t.Chain,
		StartMode: t.StartMode}
}

func templateBuildOf(b store.TemplateBuild, tags []string) client.TemplateBuild {
	out := client.TemplateBuild{BuildID: b.ID, Status: b.Status, Reason: b.Reason, Tags: tags, Steps: b.Steps,
		CachedSteps: b.CachedSteps, CreatedAt: b.CreatedAt, StartedAt: timeOrNil(b.StartedAt), FinishedAt: timeOrNil(b.FinishedAt)}
	if p := b.Parent; p.Kind != "" {
		out.Parent = &client.TemplateParent{Kind: p.Kind, Name: p.Name, TemplateID: p.TemplateID, BuildID: p.BuildID, Image: p.Image}
	}
	if !b.StartedAt.IsZero() && !b.FinishedAt.IsZero() {
		out.DurationMs = b.FinishedAt.Sub(b.StartedAt).Milliseconds()
	}
	return out
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
