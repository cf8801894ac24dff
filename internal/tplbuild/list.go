package tplbuild

import (
	"context"
	"time"
)

// Summary is one of a team's built templates as a list shows it: its last
// build's status and how many of its steps came from the step cache.
type Summary struct {
	ID, Name    string
	CreatedAt   time.Time
	Tags        []string
	Builds      int
	LastBuildID string
	LastStatus  string
	CachedSteps int
	// StartMode: how the last ready build's sandboxes get its start
	// command running (StartMemory, StartEachCreate; "" none).
	StartMode string
}

// List summarizes the team's built templates.
func (s *Service) List(ctx context.Context, team string) ([]Summary, error) {
	tmpls, err := s.cfg.Store.ListBuiltTemplates(ctx, team)
	if err != nil {
		return nil, err
	}
	out := make([]Summary, 0, len(tmpls))
	for _, t := range tmpls {
		sum := Summary{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt}
		builds, err := s.cfg.Store.ListTemplateBuilds(ctx, t.ID)
		if err != nil {
			return nil, err
		}
		sum.Builds = len(builds)
		if len(builds) > 0 { // newest first
			sum.LastBuildID, sum.LastStatus, sum.CachedSteps = builds[0].ID, builds[0].Status, builds[0].CachedSteps
		}
		for _, b := range builds {
			if b.Status == StatusReady {
				sum.StartMode = StartMode(b)
				break
			}
		}
		tags, err := s.cfg.Store.ListTemplateTags(ctx, t.ID)
		if err != nil {
			return nil, err
		}
		for _, tg := range tags {
			sum.Tags = append(sum.Tags, tg.Tag)
		}
		out = append(out, sum)
	}
	return out, nil
}
