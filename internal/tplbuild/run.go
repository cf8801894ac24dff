package tplbuild

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/network"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/store"
)

// Build steps run as this user in this directory until a USER or
// WORKDIR step says otherwise (E2B's base: the user "user").
const (
	defaultUser    = "user"
	defaultWorkdir = "/home/user"
)

// stepError is a step that failed: the build fails with its output.
type stepError struct {
	step int // 0-based
	msg  string
}

func (e *stepError) Error() string { return e.msg }

// runner is one build in progress: its sandbox and the state the steps
// so far left (user, workdir, environment).
type runner struct {
	s       *Service
	team    string
	tmpl    store.BuiltTemplate
	build   store.TemplateBuild
	log     *buildLog
	steps   []Step
	sandbox string // "" until one is started
	runtime string // the build sandbox's runtime
	memSnap string // the snapshot with memory after the start command
	user    string
	workdir string
	env     map[string]string
	network *network.Policy // the build sandbox's (nil: loopback only)
}

// run builds b and records how it ended.
func (s *Service) run(ctx context.Context, team string, tmpl store.BuiltTemplate, b store.TemplateBuild, spec Spec, pol *network.Policy, tags []string, l *buildLog) {
	r := &runner{s: s, team: team, tmpl: tmpl, build: b, log: l, steps: spec.Steps, user: defaultUser, workdir: defaultWorkdir, env: map[string]string{}, network: pol}
	defer s.saveLog(b.ID, l) // after the last line is logged
	start := time.Now()
	l.add("info", "base", "Building template %s (build %s) from %s", tmpl.Name, b.ID, orBase(spec))
	snap, cached, err := r.runAll(ctx, spec)
	r.cleanup()
	b.FinishedAt, b.CachedSteps, b.User, b.Workdir = time.Now().UTC(), cached, r.user, r.workdir
	b.Runtime, b.MemorySnapshotID = r.runtime, r.memSnap
	b.Parent = r.build.Parent
	bg := context.WithoutCancel(ctx)
	if err != nil {
		b.Status, b.Reason = StatusError, err.Error()
		var se *stepError
		if errors.As(err, &se) {
			b.Step = strconv.Itoa(se.step + 1)
		}
		l.add("error", b.Step, "Build failed: %s", err)
		if perr := s.cfg.Store.PutTemplateBuild(bg, b); perr != nil {
			s.cfg.Log.Warn("record failed template build", "build", b.ID, "err", perr)
		}
		return
	}
	b.Status, b.SnapshotID = StatusReady, snap
	if err := s.cfg.Store.PutTemplateBuild(bg, b); err != nil {
		s.cfg.Log.Warn("record template build", "build", b.ID, "err", err)
		return
	}
	for _, t := range tags {
		if err := s.cfg.Store.SetTemplateTag(bg, tmpl.ID, t, b.ID); err != nil {
			s.cfg.Log.Warn("tag template build", "build", b.ID, "tag", t, "err", err)
		}
	}
	l.add("info", "finalize", "Build finished in %s: %d of %d steps cached, template %s ready (tags %s)",
		time.Since(start).Round(time.Millisecond), cached, len(spec.Steps), tmpl.Name, strings.Join(tags, ", "))
	s.evict(bg, team)
}

func orBase(spec Spec) string {
	if ref, _, _ := spec.image(); ref != "" {
		return "image " + ref
	}
	p, _ := spec.parent()
	return p
}

// runAll reuses the longest cached prefix of the steps and runs the rest
// in a sandbox, snapshotting after each. It returns the last snapshot and
// how many steps came from the cache.
func (r *runner) runAll(ctx context.Context, spec Spec) (string, int, error) {
	source, key, parent, err := r.parentOf(ctx, spec)
	if err != nil {
		return "", 0, err
	}
	r.build.Parent = parent
	if err := r.s.cfg.Store.PutTemplateBuild(ctx, r.build); err != nil { // a build in flight shows its parent
		return "", 0, err
	}
	key = networkKey(key, r.network)
	keys := make([]string, len(spec.Steps))
	for i, st := range spec.Steps {
		keys[i] = stepKey(key, st)
		key = keys[i]
	}
	cached, last := r.cachedPrefix(ctx, spec, keys)
	if cached == len(spec.Steps) && last != "" && spec.StartCmd == "" {
		return last, cached, nil
	}
	if last != "" {
		source = last
	}
	if err := r.start(ctx, source, spec.Runtime); err != nil {
		return "", cached, err
	}
	snap := last
	for i := cached; i < len(spec.Steps); i++ {
		st := spec.Steps[i]
		label := r.label(i)
		r.log.add("info", strconv.Itoa(i+1), "%s %s", label, describe(st))
		t0 := time.Now()
		if err := r.runStep(ctx, i, st); err != nil {
			return "", cached, err
		}
		if snap, err = r.snapshot(ctx, keys[i]); err != nil {
			return "", cached, err
		}
		r.log.add("info", strconv.Itoa(i+1), "%s done in %s", label, time.Since(t0).Round(time.Millisecond))
	}
	if len(spec.Steps) == 0 {
		if snap, err = r.snapshot(ctx, ""); err != nil {
			return "", 0, err
		}
	}
	return snap, cached, r.checkStart(ctx, spec)
}

func (r *runner) label(i int) string {
	return fmt.Sprintf("[builder %d/%d]", i+1, len(r.steps))
}

// cachedPrefix finds how many leading steps the cache holds (stopping at
// the first forced one) and replays their effect on the runner's state.
func (r *runner) cachedPrefix(ctx context.Context, spec Spec, keys []string) (int, string) {
	last := ""
	for i, st := range spec.Steps {
		if spec.Force || st.Force {
			return i, last
		}
		e, err := r.s.cfg.Store.GetStepCache(ctx, r.team, keys[i])
		if err != nil {
			return i, last
		}
		if _, err := r.s.cfg.Sandboxes.GetSnapshot(ctx, r.team, e.SnapshotID); err != nil {
			_ = r.s.cfg.Store.DeleteStepCache(ctx, r.team, keys[i])
			return i, last
		}
		r.apply(st)
		last = e.SnapshotID
		r.log.add("info", strconv.Itoa(i+1), "CACHED %s %s", r.label(i), describe(st))
	}
	return len(spec.Steps), last
}

// parentOf is what a build's sandbox starts from (a server template, or
// the snapshot of one of the team's built templates, or an image's), its
// cache key, and the parent the build records.
func (r *runner) parentOf(ctx context.Context, spec Spec) (source, key string, parent store.BuildParent, err error) {
	s, team := r.s, r.team
	name, err := spec.parent()
	if err != nil {
		return "", "", parent, err
	}
	if name == "" {
		ref, auth, _ := spec.image() // checked by parent
		parent.Kind, parent.Image = store.ParentImage, ref
		source, key, err = s.imageTemplate(ctx, ref, auth, r.log)
		return source, key, parent, err
	}
	if snap, b, ok, err := s.Resolve(ctx, team, name); err != nil {
		return "", "", parent, err
	} else if ok {
		parent.Kind, parent.Name, parent.TemplateID, parent.BuildID = store.ParentBuild, tagless(name), b.TemplateID, b.ID
		if tmpl, err := s.cfg.Store.GetBuiltTemplate(ctx, team, b.TemplateID); err == nil {
			parent.Name = tmpl.Name // name, not the id the spec may give
		}
		return snap, "snapshot:" + snap, parent, nil
	}
	t, err := s.cfg.Store.GetTemplate(ctx, name)
	if errdefs.IsNotFound(err) {
		return "", "", parent, fmt.Errorf("parent template %q does not exist: %w", name, errdefs.ErrNotFound)
	}
	if err != nil {
		return "", "", parent, err
	}
	parent.Kind, parent.Name = store.ParentTemplate, name
	return name, "template:" + name + ":" + strconv.FormatInt(t.CreatedAt.UnixNano(), 10), parent, nil
}

func tagless(ref string) string {
	name, _, _ := cutTag(ref)
	return name
}

// start starts the build's sandbox from source on runtime, with the
// build's network (network.go), and a run timeout past the build's.
func (r *runner) start(ctx context.Context, source, runtime string) error {
	timeout := r.s.cfg.Timeout + time.Minute
	rec, _, err := r.s.cfg.Sandboxes.CreateOnce(ctx, session.CreateRequest{
		Team: r.team, Template: source, Timeout: &timeout, Runtime: runtime, Network: r.network,
		Metadata: map[string]string{"warren.templateBuild": r.build.ID, "warren.template": r.tmpl.Name},
	})
	if err != nil {
		return fmt.Errorf("start the build sandbox from %s: %w", source, err)
	}
	r.sandbox, r.runtime = rec.ID, rec.Runtime
	r.log.add("info", "base", "Build sandbox %s started from %s on the %s runtime; network: %s", rec.ID, source, orDefault(rec.Runtime), describeNetwork(r.network))
	return nil
}

// snapshot takes the files snapshot after a step and caches it by key
// ("" caches nothing).
func (r *runner) snapshot(ctx context.Context, key string) (string, error) {
	res, err := r.s.cfg.Sandboxes.Snapshot(ctx, r.team, r.sandbox, session.SnapshotRequest{
		Labels: map[string]string{"warren.template": r.tmpl.Name, "warren.templateBuild": r.build.ID},
	})
	if err != nil {
		return "", fmt.Errorf("snapshot the build sandbox: %w", err)
	}
	if key != "" {
		if err := r.s.cfg.Store.PutStepCache(ctx, store.StepCacheEntry{Team: r.team, Key: key, SnapshotID: res.ID, Bytes: res.ExclusiveBytes}); err != nil {
			return "", err
		}
	}
	return res.ID, nil
}

// cleanup deletes the build's sandbox: only its snapshots outlive it.
func (r *runner) cleanup() {
	if r.sandbox == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.s.cfg.Sandboxes.Delete(ctx, r.team, r.sandbox); err != nil && !errdefs.IsNotFound(err) {
		r.s.cfg.Log.Warn("delete build sandbox", "sandbox", r.sandbox, "err", err)
	}
}

func describe(st Step) string {
	switch st.Type {
	case "RUN":
		if len(st.Args) > 1 && st.Args[1] != "" {
			return "RUN " + st.Args[0] + " (as " + st.Args[1] + ")"
		}
	case "COPY":
		return "COPY " + st.Args[0] + " " + st.Args[1]
	}
	return st.Type + " " + strings.Join(st.Args, " ")
}

// checkStart runs the start command after the steps and fails the build
// when its ready command never succeeds. Once ready, a runtime that saves
// memory snapshots it so (snapshotStart); otherwise a create runs it
// afresh on the files snapshot.
func (r *runner) checkStart(ctx context.Context, spec Spec) error {
	if spec.StartCmd == "" {
		return nil
	}
	r.log.add("info", "finalize", "Running the start command %q until %q succeeds", spec.StartCmd, spec.ReadyCmd)
	t0 := time.Now()
	if err := r.s.startAndWait(ctx, r.team, r.sandbox, spec.StartCmd, spec.ReadyCmd, r.user, r.workdir, r.env); err != nil {
		return &stepError{step: len(spec.Steps), msg: err.Error()}
	}
	r.log.add("info", "finalize", "Start command ready in %s", time.Since(t0).Round(time.Millisecond))
	r.snapshotStart(ctx)
	return nil
}
