package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// BuiltTemplate is a team's template built from steps (internal/tplbuild):
// its name is the E2B alias a create names.
type BuiltTemplate struct {
	ID        string
	Team      string
	Name      string
	CreatedAt time.Time
}

// TemplateBuild is one build of a BuiltTemplate. A ready build's result is
// SnapshotID, a files snapshot of the build sandbox.
type TemplateBuild struct {
	ID         string
	TemplateID string
	Status     string // waiting, building, ready, error
	SnapshotID string
	Reason     string
	Step       string // the failed step ("0"-based index as a string)
	StartCmd   string
	ReadyCmd   string
	// User and Workdir are the last USER and WORKDIR of its steps: the
	// start command runs as that user there.
	User        string
	Workdir     string
	CachedSteps int
	// Steps is how many steps the build has (CachedSteps of them came
	// from the step cache).
	Steps  int
	Parent BuildParent
	// CreatedAt is when it was requested, StartedAt when its steps began
	// to run, FinishedAt when it ended.
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	// MemorySnapshotID is the snapshot with memory taken once the start
	// command was ready (gvisor): a create restores it, the server
	// running, instead of running the start command. "" when none.
	MemorySnapshotID string
	// Runtime is the runtime the build's sandbox ran on.
	Runtime string
	// Network is the build sandbox's network, as its log says it
	// ("none (loopback only)", "internet", ...).
	Network string
}

// Parent kinds of a template build.
const (
	ParentTemplate = "template" // one of the server's own templates
	ParentBuild    = "build"    // a build of another of the team's built templates
	ParentImage    = "image"    // an OCI image
)

// BuildParent is what a build's sandbox started from: a server template
// (Name), a build of one of the team's built templates (Name, TemplateID,
// BuildID), or an image (Image). Kind "" is a build from before parents
// were recorded, or one that failed before its parent was known.
type BuildParent struct {
	Kind       string `json:"kind,omitempty"`
	Name       string `json:"name,omitempty"`
	TemplateID string `json:"templateID,omitempty"`
	BuildID    string `json:"buildID,omitempty"`
	Image      string `json:"image,omitempty"`
}

// TemplateTag names one build of a template.
type TemplateTag struct {
	Tag       string
	BuildID   string
	CreatedAt time.Time
}

// StepCacheEntry is the snapshot taken after a build step, by the step's
// key (the hash of its parent's key, the step and its files).
type StepCacheEntry struct {
	Team       string
	Key        string
	SnapshotID string
	Bytes      int64
	LastUsed   time.Time
}

// EnsureBuiltTemplate returns the team's template of that name, making
// it with id when it does not exist.
func (s *templateBuildTable) EnsureBuiltTemplate(ctx context.Context, team, name, id string) (BuiltTemplate, error) {
	now := time.Now().UTC()
	if _, err := s.w.ExecContext(ctx, `INSERT INTO built_templates (id, team, name, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (name) DO NOTHING`, id, team, name, toNanos(now)); err != nil {
		return BuiltTemplate{}, fmt.Errorf("template %q: %w", name, dbErr(err))
	}
	return s.builtTemplate(ctx, s.w, `team = ? AND name = ?`, team, name)
}

// GetBuiltTemplate finds a team's template by id or name.
func (s *templateBuildTable) GetBuiltTemplate(ctx context.Context, team, ref string) (BuiltTemplate, error) {
	return s.builtTemplate(ctx, s.r, `team = ? AND (id = ? OR name = ?)`, team, ref, ref)
}

// BuiltTemplateOwner tells which team holds a template name or id ("" none).
func (s *templateBuildTable) BuiltTemplateOwner(ctx context.Context, ref string) (string, error) {
	var team string
	err := s.r.QueryRowContext(ctx, `SELECT team FROM built_templates WHERE id = ? OR name = ? LIMIT 1`, ref, ref).Scan(&team)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return team, dbErr(err)
}

type rowQuerier interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

func (s *templateBuildTable) builtTemplate(ctx context.Context, db rowQuerier, where string, args ...any) (BuiltTemplate, error) {
	var t BuiltTemplate
	var created int64
	err := db.QueryRowContext(ctx, `SELECT id, team, name, created_at FROM built_templates WHERE `+where, args...).
		Scan(&t.ID, &t.Team, &t.Name, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return BuiltTemplate{}, fmt.Errorf("template %v: %w", args[len(args)-1], errdefs.ErrNotFound)
	}
	if err != nil {
		return BuiltTemplate{}, dbErr(err)
	}
	t.CreatedAt = fromNanos(created)
	return t, nil
}

// ListBuiltTemplates lists a team's templates by name.
func (s *templateBuildTable) ListBuiltTemplates(ctx context.Context, team string) ([]BuiltTemplate, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, team, name, created_at FROM built_templates WHERE team = ? ORDER BY name`, team)
	if err != nil {
		return nil, dbErr(err)
	}
	defer rows.Close()
	var out []BuiltTemplate
	for rows.Next() {
		var t BuiltTemplate
		var created int64
		if err := rows.Scan(&t.ID, &t.Team, &t.Name, &created); err != nil {
			return nil, dbErr(err)
		}
		t.CreatedAt = fromNanos(created)
		out = append(out, t)
	}
	return out, dbErr(rows.Err())
}

// DeleteBuiltTemplate forgets a template with its builds and tags.
func (s *templateBuildTable) DeleteBuiltTemplate(ctx context.Context, id string) error {
	_, err := s.w.ExecContext(ctx, `DELETE FROM built_templates WHERE id = ?`, id)
	return dbErr(err)
}

// PutTemplateBuild inserts or replaces a build's row.
func (s *templateBuildTable) PutTemplateBuild(ctx context.Context, b TemplateBuild) error {
	parent, err := json.Marshal(b.Parent)
	if err != nil {
		return fmt.Errorf("store build %s: %w", b.ID, err)
	}
	_, err = s.w.ExecContext(ctx, `INSERT OR REPLACE INTO template_builds (id, template_id, status, snapshot_id, reason, step,
		start_cmd, ready_cmd, user, workdir, cached_steps, steps, parent, created_at, started_at, finished_at,
		memory_snapshot_id, runtime, network)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		b.ID, b.TemplateID, b.Status, b.SnapshotID, b.Reason, b.Step, b.StartCmd, b.ReadyCmd, b.User, b.Workdir, b.CachedSteps,
		b.Steps, string(parent), toNanos(b.CreatedAt), toNanos(b.StartedAt), toNanos(b.FinishedAt), b.MemorySnapshotID, b.Runtime, b.Network)
	if err != nil {
		return fmt.Errorf("store build %s: %w", b.ID, dbErr(err))
	}
	return nil
}

const buildCols = `id, template_id, status, snapshot_id, reason, step, start_cmd, ready_cmd, user, workdir, cached_steps,
	steps, parent, created_at, started_at, finished_at, memory_snapshot_id, runtime, network`

func scanBuild(sc interface{ Scan(...any) error }) (TemplateBuild, error) {
	var b TemplateBuild
	var created, started, finished int64
	var parent string
	err := sc.Scan(&b.ID, &b.TemplateID, &b.Status, &b.SnapshotID, &b.Reason, &b.Step, &b.StartCmd, &b.ReadyCmd,
		&b.User, &b.Workdir, &b.CachedSteps, &b.Steps, &parent, &created, &started, &finished, &b.MemorySnapshotID, &b.Runtime, &b.Network)
	b.CreatedAt, b.StartedAt, b.FinishedAt = fromNanos(created), fromNanos(started), fromNanos(finished)
	if err == nil && parent != "" {
		err = json.Unmarshal([]byte(parent), &b.Parent)
	}
	return b, err
}

// BuiltTemplateDependants names the team's other templates that have a
// build (ready or in flight) started from a build of templateID: those a
// delete of templateID would leave without their parent.
func (s *templateBuildTable) BuiltTemplateDependants(ctx context.Context, templateID string) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT DISTINCT t.name FROM template_builds b JOIN built_templates t ON t.id = b.template_id
		WHERE b.template_id != ? AND b.status != 'error' AND json_extract(b.parent, '$.templateID') = ? ORDER BY t.name`,
		templateID, templateID)
	if err != nil {
		return nil, dbErr(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, dbErr(err)
		}
		out = append(out, name)
	}
	return out, dbErr(rows.Err())
}

// GetTemplateBuild returns one build of a template.
func (s *templateBuildTable) GetTemplateBuild(ctx context.Context, templateID, buildID string) (TemplateBuild, error) {
	b, err := scanBuild(s.r.QueryRowContext(ctx, `SELECT `+buildCols+` FROM template_builds WHERE template_id = ? AND id = ?`, templateID, buildID))
	if errors.Is(err, sql.ErrNoRows) {
		return TemplateBuild{}, fmt.Errorf("build %s of template %s: %w", buildID, templateID, errdefs.ErrNotFound)
	}
	return b, dbErr(err)
}

// TemplateBuildExists tells whether a build of any template has that id.
func (s *templateBuildTable) TemplateBuildExists(ctx context.Context, buildID string) (bool, error) {
	var n int
	err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM template_builds WHERE id = ?`, buildID).Scan(&n)
	return n > 0, dbErr(err)
}

// ListTemplateBuilds lists a template's builds, newest first.
func (s *templateBuildTable) ListTemplateBuilds(ctx context.Context, templateID string) ([]TemplateBuild, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+buildCols+` FROM template_builds WHERE template_id = ? ORDER BY created_at DESC`, templateID)
	if err != nil {
		return nil, dbErr(err)
	}
	defer rows.Close()
	var out []TemplateBuild
	for rows.Next() {
		b, err := scanBuild(rows)
		if err != nil {
			return nil, dbErr(err)
		}
		out = append(out, b)
	}
	return out, dbErr(rows.Err())
}

// SetTemplateTag points a template's tag at a build.
func (s *templateBuildTable) SetTemplateTag(ctx context.Context, templateID, tag, buildID string) error {
	_, err := s.w.ExecContext(ctx, `INSERT OR REPLACE INTO template_tags (template_id, tag, build_id, created_at) VALUES (?, ?, ?, ?)`,
		templateID, tag, buildID, toNanos(time.Now().UTC()))
	return dbErr(err)
}

// DeleteTemplateTag removes a tag of a template.
func (s *templateBuildTable) DeleteTemplateTag(ctx context.Context, templateID, tag string) error {
	_, err := s.w.ExecContext(ctx, `DELETE FROM template_tags WHERE template_id = ? AND tag = ?`, templateID, tag)
	return dbErr(err)
}

// ListTemplateTags lists a template's tags by name.
func (s *templateBuildTable) ListTemplateTags(ctx context.Context, templateID string) ([]TemplateTag, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT tag, build_id, created_at FROM template_tags WHERE template_id = ? ORDER BY tag`, templateID)
	if err != nil {
		return nil, dbErr(err)
	}
	defer rows.Close()
	var out []TemplateTag
	for rows.Next() {
		var t TemplateTag
		var created int64
		if err := rows.Scan(&t.Tag, &t.BuildID, &created); err != nil {
			return nil, dbErr(err)
		}
		t.CreatedAt = fromNanos(created)
		out = append(out, t)
	}
	return out, dbErr(rows.Err())
}

// GetStepCache returns a cached step's snapshot and marks it used.
func (s *templateBuildTable) GetStepCache(ctx context.Context, team, key string) (StepCacheEntry, error) {
	e := StepCacheEntry{Team: team, Key: key}
	var used int64
	err := s.r.QueryRowContext(ctx, `SELECT snapshot_id, bytes, last_used FROM template_step_cache WHERE team = ? AND key = ?`, team, key).
		Scan(&e.SnapshotID, &e.Bytes, &used)
	if errors.Is(err, sql.ErrNoRows) {
		return e, fmt.Errorf("step %s: %w", key, errdefs.ErrNotFound)
	}
	if err != nil {
		return e, dbErr(err)
	}
	e.LastUsed = fromNanos(used)
	_, err = s.w.ExecContext(ctx, `UPDATE template_step_cache SET last_used = ? WHERE team = ? AND key = ?`, toNanos(time.Now().UTC()), team, key)
	return e, dbErr(err)
}

// PutStepCache records the snapshot a step left.
func (s *templateBuildTable) PutStepCache(ctx context.Context, e StepCacheEntry) error {
	_, err := s.w.ExecContext(ctx, `INSERT OR REPLACE INTO template_step_cache (team, key, snapshot_id, bytes, last_used) VALUES (?, ?, ?, ?, ?)`,
		e.Team, e.Key, e.SnapshotID, e.Bytes, toNanos(time.Now().UTC()))
	return dbErr(err)
}

// ListStepCache lists a team's cache entries, least recently used first.
func (s *templateBuildTable) ListStepCache(ctx context.Context, team string) ([]StepCacheEntry, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT key, snapshot_id, bytes, last_used FROM template_step_cache WHERE team = ? ORDER BY last_used`, team)
	if err != nil {
		return nil, dbErr(err)
	}
	defer rows.Close()
	var out []StepCacheEntry
	for rows.Next() {
		e := StepCacheEntry{Team: team}
		var used int64
		if err := rows.Scan(&e.Key, &e.SnapshotID, &e.Bytes, &used); err != nil {
			return nil, dbErr(err)
		}
		e.LastUsed = fromNanos(used)
		out = append(out, e)
	}
	return out, dbErr(rows.Err())
}

// DeleteStepCache forgets one cache entry.
func (s *templateBuildTable) DeleteStepCache(ctx context.Context, team, key string) error {
	_, err := s.w.ExecContext(ctx, `DELETE FROM template_step_cache WHERE team = ? AND key = ?`, team, key)
	return dbErr(err)
}

// FailUnfinishedBuilds ends every build still waiting or building (the
// server that ran them stopped) with reason, and returns how many.
func (s *templateBuildTable) FailUnfinishedBuilds(ctx context.Context, reason string) (int64, error) {
	res, err := s.w.ExecContext(ctx, `UPDATE template_builds SET status = 'error', reason = ?, finished_at = ?
		WHERE status IN ('waiting', 'building')`, reason, toNanos(time.Now().UTC()))
	if err != nil {
		return 0, dbErr(err)
	}
	return res.RowsAffected()
}
