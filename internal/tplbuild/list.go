package tplbuild

import (
	"context"
	"fmt"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

// Summary is one of a team's built templates as a list shows it: its last
// build's status, how many of its steps came from the step cache, and
// the chain of parents that build started from.
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
	Steps     int
	// Chain is the parents of the newest ready build (else of the newest
	// with a known parent), nearest first: ["py-base", "base"] for
	// my-env ← py-base ← base.
	Chain []string
}

// Detail is one built template with all its builds, newest first.
type Detail struct {
	Summary
	Builds []store.TemplateBuild
	// BuildTags are the tags naming each build, by build id.
	BuildTags map[string][]string
}

// List summarizes the team's built templates.
func (s *Service) List(ctx context.Context, team string) ([]Summary, error) {
	tmpls, err := s.cfg.Store.ListBuiltTemplates(ctx, team)
	if err != nil {
		return nil, err
	}
	out := make([]Summary, 0, len(tmpls))
	for _, t := range tmpls {
		d, err := detail(ctx, s.cfg.Store, t)
		if err != nil {
			return nil, err
		}
		out = append(out, d.Summary)
	}
	return out, nil
}

// Show answers one of the team's built templates (by id, name or
// name:tag) with its builds.
func (s *Service) Show(ctx context.Context, team, ref string) (Detail, error) {
	tmpl, err := s.template(ctx, team, ref)
	if err != nil {
		return Detail{}, err
	}
	return detail(ctx, s.cfg.Store, tmpl)
}

func detail(ctx context.Context, st Store, t store.BuiltTemplate) (Detail, error) {
	d := Detail{Summary: Summary{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt}, BuildTags: map[string][]string{}}
	builds, err := st.ListTemplateBuilds(ctx, t.ID)
	if err != nil {
		return Detail{}, err
	}
	d.Builds, d.Summary.Builds = builds, len(builds)
	if len(builds) > 0 { // newest first
		b := builds[0]
		d.LastBuildID, d.LastStatus, d.CachedSteps, d.Steps = b.ID, b.Status, b.CachedSteps, b.Steps
	}
	for _, b := range builds {
		if b.Status == StatusReady {
			d.StartMode = StartMode(b)
			break
		}
	}
	if p := chainStart(builds); p.Kind != "" {
		if d.Chain, err = chain(ctx, st, p); err != nil {
			return Detail{}, err
		}
	}
	tags, err := st.ListTemplateTags(ctx, t.ID)
	if err != nil {
		return Detail{}, err
	}
	for _, tg := range tags {
		d.Tags = append(d.Tags, tg.Tag)
		d.BuildTags[tg.BuildID] = append(d.BuildTags[tg.BuildID], tg.Tag)
	}
	return d, nil
}

// chainStart is the parent a template's chain shows: the newest ready
// build's (what a create starts from), else the newest build's that got
// as far as knowing its parent.
func chainStart(builds []store.TemplateBuild) store.BuildParent {
	var p store.BuildParent
	for _, b := range builds { // newest first
		if b.Status == StatusReady && b.Parent.Kind != "" {
			return b.Parent
		}
		if p.Kind == "" {
			p = b.Parent
		}
	}
	return p
}

// maxChain bounds a parent chain (a chain is acyclic: a build's parent
// is a build that finished before it; the bound guards bad data).
const maxChain = 32

// chain follows a build's parents up to a server template or an image:
// the names, nearest first. A parent whose template was deleted since
// (before deletes refused that) ends the chain with its name.
func chain(ctx context.Context, st Store, p store.BuildParent) ([]string, error) {
	var out []string
	for range maxChain {
		switch p.Kind {
		case store.ParentImage:
			return append(out, p.Image), nil
		case store.ParentTemplate:
			return append(out, p.Name), nil
		case store.ParentBuild:
			out = append(out, p.Name)
			b, err := st.GetTemplateBuild(ctx, p.TemplateID, p.BuildID)
			if errdefs.IsNotFound(err) {
				return out, nil
			}
			if err != nil {
				return nil, err
			}
			p = b.Parent
		default:
			return out, nil
		}
	}
	return append(out, "…"), nil
}

// checkNoDependants refuses to delete a template other templates of the
// team were built from: their rebuilds would lose their parent and their
// chains would end nowhere. (Their snapshots are their own: sandboxes
// of theirs would still start.)
func checkNoDependants(ctx context.Context, st Store, tmpl store.BuiltTemplate) error {
	deps, err := st.BuiltTemplateDependants(ctx, tmpl.ID)
	if err != nil {
		return err
	}
	if len(deps) > 0 {
		return fmt.Errorf("template %s is the parent of %q: delete those first (or rebuild them from another parent): %w",
			tmpl.Name, deps, errdefs.ErrConflict)
	}
	return nil
}
