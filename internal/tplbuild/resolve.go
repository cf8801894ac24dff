package tplbuild

import (
	"context"
	"fmt"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

func timeUntilMs(t time.Time) int64 { return time.Until(t).Milliseconds() }

// Resolve finds what a create naming ref ("name", "name:tag" or a
// template id of the team's) starts from: the snapshot of the build the
// tag names, else of the newest ready build. ok is false when ref is no
// built template of the team's.
func (s *Service) Resolve(ctx context.Context, team, ref string) (snapshotID string, b store.TemplateBuild, ok bool, err error) {
	name, tag, hasTag := cutTag(ref)
	tmpl, err := s.cfg.Store.GetBuiltTemplate(ctx, team, name)
	if errdefs.IsNotFound(err) {
		return "", b, false, nil
	}
	if err != nil {
		return "", b, false, err
	}
	b, err = s.readyBuild(ctx, tmpl, tag, hasTag)
	if err != nil {
		return "", b, false, err
	}
	return b.SnapshotID, b, true, nil
}

func (s *Service) readyBuild(ctx context.Context, tmpl store.BuiltTemplate, tag string, hasTag bool) (store.TemplateBuild, error) {
	if hasTag {
		tags, err := s.cfg.Store.ListTemplateTags(ctx, tmpl.ID)
		if err != nil {
			return store.TemplateBuild{}, err
		}
		for _, t := range tags {
			if t.Tag == tag {
				return s.cfg.Store.GetTemplateBuild(ctx, tmpl.ID, t.BuildID)
			}
		}
		return store.TemplateBuild{}, fmt.Errorf("template %s has no tag %q: %w", tmpl.Name, tag, errdefs.ErrNotFound)
	}
	builds, err := s.cfg.Store.ListTemplateBuilds(ctx, tmpl.ID)
	if err != nil {
		return store.TemplateBuild{}, err
	}
	for _, b := range builds {
		if b.Status == StatusReady {
			return b, nil
		}
	}
	return store.TemplateBuild{}, fmt.Errorf("template %s has no finished build yet: %w", tmpl.Name, errdefs.ErrNotFound)
}

// AliasExists answers E2B's GET /templates/aliases/{alias}: the team's
// template, or ErrPermissionDenied for another team's, or ErrNotFound.
func (s *Service) AliasExists(ctx context.Context, team, alias string) (store.BuiltTemplate, error) {
	tmpl, err := s.cfg.Store.GetBuiltTemplate(ctx, team, alias)
	if err == nil {
		// A template whose builds all failed is no template yet.
		_, err = s.readyBuild(ctx, tmpl, "", false)
		return tmpl, err
	}
	if !errdefs.IsNotFound(err) {
		return tmpl, err
	}
	owner, err := s.cfg.Store.BuiltTemplateOwner(ctx, alias)
	if err != nil {
		return store.BuiltTemplate{}, err
	}
	if owner != "" {
		return store.BuiltTemplate{}, fmt.Errorf("template %q belongs to another team: %w", alias, errdefs.ErrPermissionDenied)
	}
	return store.BuiltTemplate{}, fmt.Errorf("template %q: %w", alias, errdefs.ErrNotFound)
}

// AssignTags points tags at the build target ("name:tag" or "name", the
// newest ready build) names, and returns that build's id.
func (s *Service) AssignTags(ctx context.Context, team, target string, tags []string) (string, error) {
	name, tag, hasTag := cutTag(target)
	tmpl, err := s.cfg.Store.GetBuiltTemplate(ctx, team, name)
	if err != nil {
		return "", err
	}
	if len(tags) == 0 {
		return "", fmt.Errorf("no tags to assign: %w", errdefs.ErrInvalid)
	}
	for _, t := range tags {
		if err := checkTag(t); err != nil {
			return "", err
		}
	}
	b, err := s.readyBuild(ctx, tmpl, tag, hasTag)
	if err != nil {
		return "", err
	}
	for _, t := range tags {
		if err := s.cfg.Store.SetTemplateTag(ctx, tmpl.ID, t, b.ID); err != nil {
			return "", err
		}
	}
	return b.ID, nil
}

// RemoveTags removes tags from the team's template name.
func (s *Service) RemoveTags(ctx context.Context, team, name string, tags []string) error {
	tmpl, err := s.cfg.Store.GetBuiltTemplate(ctx, team, name)
	if err != nil {
		return err
	}
	for _, t := range tags {
		if err := s.cfg.Store.DeleteTemplateTag(ctx, tmpl.ID, t); err != nil {
			return err
		}
	}
	return nil
}

// Tags lists the tags of the team's template (by id or name).
func (s *Service) Tags(ctx context.Context, team, ref string) ([]store.TemplateTag, error) {
	tmpl, err := s.template(ctx, team, ref)
	if err != nil {
		return nil, err
	}
	return s.cfg.Store.ListTemplateTags(ctx, tmpl.ID)
}

// Delete forgets the team's template (by id or name) and its builds with
// their log files, unless other templates were built from it
// (ErrConflict, naming them). The builds' files snapshots stay in the
// step cache until evicted; their snapshots with memory belong to them
// alone and go now.
func (s *Service) Delete(ctx context.Context, team, ref string) error {
	tmpl, err := s.template(ctx, team, ref)
	if err != nil {
		return err
	}
	if err := checkNoDependants(ctx, s.cfg.Store, tmpl); err != nil {
		return err
	}
	builds, err := s.cfg.Store.ListTemplateBuilds(ctx, tmpl.ID)
	if err != nil {
		return err
	}
	s.dropMemory(ctx, team, tmpl, true)
	if err := s.cfg.Store.DeleteBuiltTemplate(ctx, tmpl.ID); err != nil {
		return err
	}
	for _, b := range builds {
		removeLog(s.cfg.Log, s.logPath(b.ID))
	}
	return nil
}
