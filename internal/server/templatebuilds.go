package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
	"github.com/warrenhq/warren/internal/tplbuild"
)

// TemplateBuilds builds templates from steps (internal/tplbuild): E2B's
// Template SDK calls.
type TemplateBuilds interface {
	RequestBuild(ctx context.Context, team, ref string, tags []string) (tplbuild.Requested, error)
	FilePresent(ctx context.Context, team, templateID, hash string) (bool, error)
	PutFile(ctx context.Context, team, templateID, hash string, body io.Reader, limit int64) (int64, error)
	StartBuild(ctx context.Context, team, templateID, buildID string, spec tplbuild.Spec) error
	Status(ctx context.Context, team, templateID, buildID string, logsOffset int) (tplbuild.Status, error)
	Resolve(ctx context.Context, team, ref string) (string, store.TemplateBuild, bool, error)
	AliasExists(ctx context.Context, team, alias string) (store.BuiltTemplate, error)
	AssignTags(ctx context.Context, team, target string, tags []string) (string, error)
	RemoveTags(ctx context.Context, team, name string, tags []string) error
	Tags(ctx context.Context, team, ref string) ([]store.TemplateTag, error)
	Delete(ctx context.Context, team, ref string) error
	Cache(ctx context.Context, team string) ([]tplbuild.CacheEntry, error)
	Start(ctx context.Context, team, sandboxID string, b store.TemplateBuild) error
	StartSource(ctx context.Context, team string, b store.TemplateBuild, runtime string, filesOnly bool) (string, bool)
	List(ctx context.Context, team string) ([]tplbuild.Summary, error)
	Show(ctx context.Context, team, ref string) (tplbuild.Detail, error)
}

// templateBuildRoutes serve E2B's template build API.
type templateBuildRoutes struct {
	builds    TemplateBuilds
	maxUpload int64
}

// routes registers the template build API. GET /templates/aliases/{alias}
// and GET /templates/{id}/tags share one pattern: Go's mux would find the
// two ambiguous for /templates/aliases/tags.
func (s *templateBuildRoutes) routes(m *routeMux, auth func(http.HandlerFunc) http.Handler) {
	m.Handle("POST /v3/templates", auth(s.requestBuild))
	m.Handle("GET /templates/{templateID}/files/{hash}", auth(s.fileLink))
	m.Handle("PUT /templates/{templateID}/files/{hash}", auth(s.uploadFile))
	m.Handle("POST /v2/templates/{templateID}/builds/{buildID}", auth(s.startBuild))
	m.Handle("GET /templates/{templateID}/builds/{buildID}/status", auth(s.buildStatus))
	m.Handle("GET /templates/{templateID}/{sub}", auth(s.aliasOrTags))
	m.Handle("POST /templates/tags", auth(s.assignTags))
	m.Handle("DELETE /templates/tags", auth(s.removeTags))
	m.Handle("GET /templates/builds/cache", auth(s.stepCache))
	m.Handle("GET /templates/{id}", auth(s.show))
}

func (s *templateBuildRoutes) available(w http.ResponseWriter, r *http.Request) bool {
	if s.builds == nil {
		writeError(w, r, fmt.Errorf("this server builds no templates: %w", errdefs.ErrUnsupported))
		return false
	}
	return true
}

func (s *templateBuildRoutes) requestBuild(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name     string   `json:"name"`
		Alias    string   `json:"alias"`
		Tags     []string `json:"tags"`
		CPUCount int      `json:"cpuCount"`
		MemoryMB int      `json:"memoryMB"`
	}
	if !s.decode(w, r, &body) {
		return
	}
	if body.Name == "" {
		body.Name = body.Alias
	}
	req, err := s.builds.RequestBuild(r.Context(), teamOf(r), body.Name, body.Tags)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{
		"templateID": req.Template.ID, "buildID": req.BuildID, "public": false,
		"names": []string{req.Template.Name}, "aliases": []string{req.Template.Name}, "tags": req.Tags,
	})
}

// decode reads a JSON body, answering the error itself; false: stop.
func (s *templateBuildRoutes) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if !s.available(w, r) {
		return false
	}
	if err := decodeJSON(w, r, v); err != nil {
		writeError(w, r, err)
		return false
	}
	return true
}

// fileLink answers whether a copy's files are stored already and, if
// not, where to PUT them: this server, with the caller's own key.
func (s *templateBuildRoutes) fileLink(w http.ResponseWriter, r *http.Request) {
	if !s.available(w, r) {
		return
	}
	id, hash := r.PathValue("templateID"), r.PathValue("hash")
	present, err := s.builds.FilePresent(r.Context(), teamOf(r), id, hash)
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := map[string]any{"present": present}
	if !present {
		out["url"] = uploadBase(r) + "/templates/" + id + "/files/" + hash
		out["headers"] = map[string]string{"X-API-Key": apiKeyOf(r)}
	}
	writeJSON(w, http.StatusCreated, out)
}

func (s *templateBuildRoutes) uploadFile(w http.ResponseWriter, r *http.Request) {
	if !s.available(w, r) {
		return
	}
	n, err := s.builds.PutFile(r.Context(), teamOf(r), r.PathValue("templateID"), r.PathValue("hash"), r.Body, s.maxUpload)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"bytes": n})
}

func (s *templateBuildRoutes) startBuild(w http.ResponseWriter, r *http.Request) {
	var spec tplbuild.Spec
	if !s.decode(w, r, &spec) {
		return
	}
	if err := s.builds.StartBuild(r.Context(), teamOf(r), r.PathValue("templateID"), r.PathValue("buildID"), spec); err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

func (s *templateBuildRoutes) buildStatus(w http.ResponseWriter, r *http.Request) {
	if !s.available(w, r) {
		return
	}
	offset := 0
	if v := r.URL.Query().Get("logsOffset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			writeError(w, r, fmt.Errorf("logsOffset %q: want a number: %w", v, errdefs.ErrInvalid))
			return
		}
		offset = n
	}
	st, err := s.builds.Status(r.Context(), teamOf(r), r.PathValue("templateID"), r.PathValue("buildID"), offset)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// aliasOrTags serves GET /templates/aliases/{alias} and
// GET /templates/{templateID}/tags.
func (s *templateBuildRoutes) aliasOrTags(w http.ResponseWriter, r *http.Request) {
	if !s.available(w, r) {
		return
	}
	first, sub := r.PathValue("templateID"), r.PathValue("sub")
	switch {
	case first == "aliases":
		t, err := s.builds.AliasExists(r.Context(), teamOf(r), sub)
		if err != nil {
			writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"templateID": t.ID, "public": false})
	case sub == "tags":
		tags, err := s.builds.Tags(r.Context(), teamOf(r), first)
		if err != nil {
			writeError(w, r, err)
			return
		}
		out := make([]map[string]any, 0, len(tags))
		for _, t := range tags {
			out = append(out, map[string]any{"tag": t.Tag, "buildID": t.BuildID, "createdAt": t.CreatedAt.Format(time.RFC3339Nano)})
		}
		writeJSON(w, http.StatusOK, out)
	default:
		writeError(w, r, fmt.Errorf("no route GET %s: %w", r.URL.Path, errdefs.ErrNotFound))
	}
}

func (s *templateBuildRoutes) assignTags(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Target string   `json:"target"`
		Tags   []string `json:"tags"`
	}
	if !s.decode(w, r, &body) {
		return
	}
	buildID, err := s.builds.AssignTags(r.Context(), teamOf(r), body.Target, body.Tags)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"buildID": buildID, "tags": body.Tags})
}

func (s *templateBuildRoutes) removeTags(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name string   `json:"name"`
		Tags []string `json:"tags"`
	}
	if !s.decode(w, r, &body) {
		return
	}
	if err := s.builds.RemoveTags(r.Context(), teamOf(r), body.Name, body.Tags); err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *templateBuildRoutes) stepCache(w http.ResponseWriter, r *http.Request) {
	if !s.available(w, r) {
		return
	}
	entries, err := s.builds.Cache(r.Context(), teamOf(r))
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(entries))
	for _, e := range entries {
		out = append(out, map[string]any{"key": e.Key, "snapshotID": e.SnapshotID, "bytes": e.Bytes,
			"lastUsed": e.LastUsed.Format(time.RFC3339Nano), "inUse": e.InUse})
	}
	writeJSON(w, http.StatusOK, out)
}

// resolveBuilt turns a create's templateID that names one of the team's
// built templates into the snapshot its build left, and the build (for
// its start command); anything else is left as it is. A build whose start
// command was snapshotted with memory starts from that snapshot (on the
// runtime that saved it, unless the create asks for another or for files
// only): warm, its server running, there is no start command to run.
func (s *templateBuildRoutes) resolveBuilt(ctx context.Context, team, ref, runtime string, filesOnly bool) (string, *store.TemplateBuild, bool, error) {
	if tplbuild.IsImageTemplate(ref) {
		// An image's template holds the pull of the team that built from
		// it first: only builds start from it (after the registry let
		// their caller read that digest), never a create by name.
		return "", nil, false, fmt.Errorf("template %q: %w", ref, errdefs.ErrNotFound)
	}
	if s == nil || s.builds == nil || ref == "" {
		return ref, nil, false, nil
	}
	_, b, ok, err := s.builds.Resolve(ctx, team, ref)
	if err != nil || !ok {
		return ref, nil, false, err
	}
	snap, warm := s.builds.StartSource(ctx, team, b, runtime, filesOnly)
	return snap, &b, warm, nil
}

// builtTemplateID turns a list's template filter that names one of the
// team's built templates (by name or id) into its id: the id its
// sandboxes report. Anything else is left as it is.
func (s *templateBuildRoutes) builtTemplateID(ctx context.Context, team, ref string) (string, error) {
	if s == nil || s.builds == nil || ref == "" {
		return ref, nil
	}
	_, b, ok, err := s.builds.Resolve(ctx, team, ref)
	if errdefs.IsNotFound(err) || (err == nil && !ok) {
		return ref, nil
	}
	if err != nil {
		return ref, err
	}
	return b.TemplateID, nil
}

// started runs a built template's start command in a sandbox just made
// from it; a start that never gets ready deletes the sandbox.
func (s *templateBuildRoutes) started(ctx context.Context, team, id string, b *store.TemplateBuild, del func(ctx context.Context, team, id string) error) error {
	if b == nil || b.StartCmd == "" {
		return nil
	}
	if err := s.builds.Start(ctx, team, id, *b); err != nil {
		if derr := del(context.WithoutCancel(ctx), team, id); derr != nil && !errdefs.IsNotFound(derr) {
			return fmt.Errorf("%w (and deleting the sandbox: %v)", err, derr)
		}
		return err
	}
	return nil
}

// deleteBuilt serves DELETE /templates/{id} for a template the team
// built from steps (by id or name): false when it is none.
func (s *templateBuildRoutes) deleteBuilt(w http.ResponseWriter, r *http.Request) bool {
	if s.builds == nil {
		return false
	}
	err := s.builds.Delete(r.Context(), teamOf(r), r.PathValue("id"))
	if errdefs.IsNotFound(err) {
		return false
	}
	if err != nil {
		writeError(w, r, err)
		return true
	}
	w.WriteHeader(http.StatusNoContent)
	return true
}

// listed is the team's built templates as GET /templates lists them,
// beside the server's own: E2B's list names a template's id, its alias,
// its last build and that build's status.
func (s *templateBuildRoutes) listed(ctx context.Context, team string) ([]client.Template, error) {
	if s == nil || s.builds == nil {
		return nil, nil
	}
	sums, err := s.builds.List(ctx, team)
	if err != nil {
		return nil, err
	}
	out := make([]client.Template, 0, len(sums))
	for _, t := range sums {
		out = append(out, builtTemplateOf(t))
	}
	return out, nil
}

// addAlias gives a sandbox of a built template its alias, the template's
// name, as E2B's GET /sandboxes/{id} does (the SDK's getInfo().name).
func (s *templateBuildRoutes) addAlias(ctx context.Context, team string, sb *client.Sandbox) {
	if s == nil || s.builds == nil || !strings.HasPrefix(sb.TemplateID, "tpl") {
		return
	}
	sums, err := s.builds.List(ctx, team)
	if err != nil {
		return // the alias is a courtesy: the sandbox's answer stands
	}
	for _, t := range sums {
		if t.ID == sb.TemplateID {
			sb.Alias = t.Name
		}
	}
}

// uploadBase is the URL the caller reached this server at: through a
// fleet gateway, the gateway's (its X-Forwarded-Host), which routes the
// upload back to this node. The headers only shape the caller's own
// answer, so one the caller sets itself misleads no one else.
func uploadBase(r *http.Request) string {
	scheme, host := "http", r.Host
	if r.TLS != nil {
		scheme = "https"
	}
	if fh := r.Header.Get("X-Forwarded-Host"); fh != "" {
		host = fh
		if fp := r.Header.Get("X-Forwarded-Proto"); fp == "http" || fp == "https" {
			scheme = fp
		}
	}
	return scheme + "://" + host
}
