package tplbuild

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/commands"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/keylock"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/store"
)

// Store is what builds keep in the metadata database.
type Store interface {
	GetTemplate(ctx context.Context, name string) (store.Template, error)
	EnsureBuiltTemplate(ctx context.Context, team, name, id string) (store.BuiltTemplate, error)
	GetBuiltTemplate(ctx context.Context, team, ref string) (store.BuiltTemplate, error)
	BuiltTemplateOwner(ctx context.Context, ref string) (string, error)
	ListBuiltTemplates(ctx context.Context, team string) ([]store.BuiltTemplate, error)
	DeleteBuiltTemplate(ctx context.Context, id string) error
	PutTemplateBuild(ctx context.Context, b store.TemplateBuild) error
	GetTemplateBuild(ctx context.Context, templateID, buildID string) (store.TemplateBuild, error)
	ListTemplateBuilds(ctx context.Context, templateID string) ([]store.TemplateBuild, error)
	TemplateBuildExists(ctx context.Context, buildID string) (bool, error)
	BuiltTemplateDependants(ctx context.Context, templateID string) ([]string, error)
	SetTemplateTag(ctx context.Context, templateID, tag, buildID string) error
	DeleteTemplateTag(ctx context.Context, templateID, tag string) error
	ListTemplateTags(ctx context.Context, templateID string) ([]store.TemplateTag, error)
	GetStepCache(ctx context.Context, team, key string) (store.StepCacheEntry, error)
	PutStepCache(ctx context.Context, e store.StepCacheEntry) error
	ListStepCache(ctx context.Context, team string) ([]store.StepCacheEntry, error)
	DeleteStepCache(ctx context.Context, team, key string) error
	FailUnfinishedBuilds(ctx context.Context, reason string) (int64, error)
}

// Sandboxes is what a build needs of the session service: a sandbox to
// run the steps in and snapshots of it.
type Sandboxes interface {
	CreateOnce(ctx context.Context, req session.CreateRequest) (store.Sandbox, bool, error)
	Delete(ctx context.Context, team, id string) error
	Snapshot(ctx context.Context, team, id string, req session.SnapshotRequest) (session.SnapshotResult, error)
	GetSnapshot(ctx context.Context, team, snapID string) (store.Snapshot, error)
	DeleteSnapshot(ctx context.Context, team, snapID string) error
	// NetworkAvailable reports whether sandboxes can be given a network
	// here (nil), or why not.
	NetworkAvailable() error
}

// Commands runs a step's commands and writes its files (commands.Service).
type Commands interface {
	ExecWait(ctx context.Context, team, id string, req client.ExecRequest) (client.ExecResult, error)
	WriteFile(ctx context.Context, team, id string, req commands.WriteFileRequest, body io.Reader) (client.EntryInfo, error)
	StartProcess(ctx context.Context, team, id string, req client.StartProcessRequest) (client.ProcessInfo, error)
}

// Config configures the build service.
type Config struct {
	Store     Store
	Sandboxes Sandboxes
	Commands  Commands
	// Dir keeps the uploaded archives of copy steps.
	Dir string
	// MaxCacheBytes is what a team's step cache may hold before its least
	// recently used entries are evicted (0: 10 GiB).
	MaxCacheBytes int64
	// BuildImage unpacks a registry image into a server template, for
	// fromImage builds (nil: fromImage is unsupported).
	BuildImage BuildImageFunc
	// Timeout bounds one build (0: 30 minutes).
	Timeout time.Duration
	// Runtimes are the server's runtimes (GET /health): a build's runtime
	// must be one, and a build on one that saves memory snapshots its
	// start command with memory.
	Runtimes []client.RuntimeInfo
	Log      *slog.Logger
	// DefaultInternet gives a build whose request says nothing about the
	// network the internet (false: loopback only; network.go).
	DefaultInternet bool
}

// Build statuses, as the SDK reads them.
const (
	StatusWaiting  = "waiting"
	StatusBuilding = "building"
	StatusReady    = "ready"
	StatusError    = "error"
)

// DefaultTag is the tag a build gets when it asks for none.
const DefaultTag = "default"

// Service builds templates and answers for them.
type Service struct {
	cfg   Config
	files fileStore

	mu      sync.Mutex
	logs    map[string]*buildLog // by build id, for the status calls
	pending map[string][]string  // tags a requested build gets when ready
	wg      sync.WaitGroup
	images  keylock.Locks // by image template: one pull per digest
}

// New makes the build service.
func New(cfg Config) *Service {
	if cfg.MaxCacheBytes <= 0 {
		cfg.MaxCacheBytes = 10 << 30
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Service{cfg: cfg, files: fileStore{dir: filepath.Clean(cfg.Dir)}, logs: map[string]*buildLog{}, pending: map[string][]string{}}
}

// Recover fails the builds a previous run of the server left unfinished:
// their sandboxes went with it (a restart deletes no snapshot, so their
// cached steps stay). Call it before serving.
func (s *Service) Recover(ctx context.Context) error {
	n, err := s.cfg.Store.FailUnfinishedBuilds(ctx, "the server stopped during the build: request a new one (the steps that finished are cached)")
	if n > 0 {
		s.cfg.Log.Info("failed template builds a restart interrupted", "builds", n)
	}
	if err != nil {
		return err
	}
	s.sweepLogs(ctx)
	return nil
}

// Wait waits for the builds in flight (tests, shutdown).
func (s *Service) Wait() { s.wg.Wait() }

// Requested is the answer to a build request.
type Requested struct {
	Template store.BuiltTemplate
	BuildID  string
	Tags     []string
}

// RequestBuild makes (or finds) the team's template of that name and a
// build of it waiting for its steps. ref is "name" or "name:tag".
func (s *Service) RequestBuild(ctx context.Context, team, ref string, tags []string) (Requested, error) {
	name, tag, err := ParseName(ref)
	if err != nil {
		return Requested{}, err
	}
	if tag != "" {
		tags = append([]string{tag}, tags...)
	}
	for _, t := range tags {
		if err := checkTag(t); err != nil {
			return Requested{}, err
		}
	}
	if len(tags) == 0 {
		tags = []string{DefaultTag}
	}
	slices.Sort(tags)
	tags = slices.Compact(tags)
	if IsImageTemplate(name) {
		return Requested{}, fmt.Errorf("template name %q: names %s<40 hex> are the server's own (images): pick another: %w", name, imageTemplatePrefix, errdefs.ErrInvalid)
	}
	if _, err := s.cfg.Store.GetTemplate(ctx, name); err == nil {
		return Requested{}, fmt.Errorf("template name %q is one of the server's own templates: pick another: %w", name, errdefs.ErrAlreadyExists)
	}
	if owner, err := s.cfg.Store.BuiltTemplateOwner(ctx, name); err != nil {
		return Requested{}, err
	} else if owner != "" && owner != team {
		return Requested{}, fmt.Errorf("template %q belongs to another team: %w", name, errdefs.ErrPermissionDenied)
	}
	tmpl, err := s.cfg.Store.EnsureBuiltTemplate(ctx, team, name, "tpl"+ids.New(17))
	if err != nil {
		return Requested{}, err
	}
	b := store.TemplateBuild{ID: ids.New(20), TemplateID: tmpl.ID, Status: StatusWaiting, CreatedAt: time.Now().UTC()}
	if err := s.cfg.Store.PutTemplateBuild(ctx, b); err != nil {
		return Requested{}, err
	}
	s.mu.Lock()
	s.pending[b.ID] = tags
	s.mu.Unlock()
	return Requested{Template: tmpl, BuildID: b.ID, Tags: tags}, nil
}

// template finds a team's template by id or name; another team's is not
// found, as one that does not exist.
func (s *Service) template(ctx context.Context, team, ref string) (store.BuiltTemplate, error) {
	name, _, _ := cutTag(ref)
	return s.cfg.Store.GetBuiltTemplate(ctx, team, name)
}

func cutTag(ref string) (name, tag string, hasTag bool) {
	for i := len(ref) - 1; i >= 0; i-- {
		if ref[i] == ':' {
			return ref[:i], ref[i+1:], true
		}
	}
	return ref, "", false
}

// FilePresent tells whether a copy's files are uploaded already.
func (s *Service) FilePresent(ctx context.Context, team, templateID, hash string) (bool, error) {
	if _, err := s.template(ctx, team, templateID); err != nil {
		return false, err
	}
	if err := CheckFilesHash(hash); err != nil {
		return false, err
	}
	return s.files.Present(team, hash), nil
}

// PutFile stores a copy's uploaded archive (checked: see checkTar).
func (s *Service) PutFile(ctx context.Context, team, templateID, hash string, body io.Reader, limit int64) (int64, error) {
	if _, err := s.template(ctx, team, templateID); err != nil {
		return 0, err
	}
	return s.files.Put(team, hash, body, limit)
}

// StartBuild checks a waiting build's steps and starts it in the
// background; its status tells how it goes.
func (s *Service) StartBuild(ctx context.Context, team, templateID, buildID string, spec Spec) error {
	tmpl, err := s.template(ctx, team, templateID)
	if err != nil {
		return err
	}
	b, err := s.cfg.Store.GetTemplateBuild(ctx, tmpl.ID, buildID)
	if err != nil {
		return err
	}
	if b.Status != StatusWaiting {
		return fmt.Errorf("build %s is %s already: request a new build (POST /v3/templates): %w", buildID, b.Status, errdefs.ErrConflict)
	}
	if err := spec.Validate(); err != nil {
		return err
	}
	if err := checkRuntime(s.cfg.Runtimes, spec.Runtime); err != nil {
		return err
	}
	for i, st := range spec.Steps {
		if st.Type == "COPY" && !s.files.Present(team, st.FilesHash) {
			return fmt.Errorf("step %d: COPY %s: its files (%s) were never uploaded: %w", i+1, st.Args[0], st.FilesHash, errdefs.ErrInvalid)
		}
	}
	pol, err := buildNetwork(s.cfg, spec)
	if err != nil {
		return err
	}
	b.Status, b.StartCmd, b.ReadyCmd, b.Network = StatusBuilding, spec.StartCmd, spec.ReadyCmd, describeNetwork(pol)
	b.Steps, b.StartedAt = len(spec.Steps), time.Now().UTC()
	if err := s.cfg.Store.PutTemplateBuild(ctx, b); err != nil {
		return err
	}
	l := &buildLog{}
	s.mu.Lock()
	s.logs[b.ID] = l
	tags := s.pending[b.ID]
	delete(s.pending, b.ID)
	s.mu.Unlock()
	if len(tags) == 0 {
		tags = []string{DefaultTag}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Timeout)
		defer cancel()
		s.run(ctx, team, tmpl, b, spec, pol, tags, l)
	}()
	return nil
}
