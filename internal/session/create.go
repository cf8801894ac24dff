package session

// Creating and deleting sandboxes: the lifecycle part of the session
// service (its pause, resume, hibernate and stop are in pause.go,
// hibernate.go and stop.go).

import (
	"context"
	"fmt"
	"time"

	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store"
)

// lifecycle is the sandboxes' state machine: create (from a template, a
// snapshot or a warm pool), pause, resume, hibernate, stop, drain, limits
// and delete.
type lifecycle struct {
	*registry
	host    lifecycleHost
	store   lifecycleStore
	volumes *archiver  // a snapshot's volume in the pool while a create copies it
	warm    *warmPools // ready sandboxes a create may claim
	net     *networks  // checks a create's network policy
	devices deviceHolds
}

// Create makes and starts a sandbox and returns its record. The template
// may also name a ready snapshot of the team's: the new sandbox is then a
// fork of it.
func (l *lifecycle) Create(ctx context.Context, req CreateRequest) (store.Sandbox, error) {
	if err := l.validate(&req); err != nil {
		return store.Sandbox{}, err
	}
	limits := l.limitsFor(req.Limits)
	if req.DiskBytes == 0 {
		req.DiskBytes = l.cfg.DefaultDisk
	}
	now := l.cfg.Now().UTC()
	rec := l.newRecord(req, limits, now)
	if err := resolveVolumes(ctx, l.cfg.Volumes, req, &rec); err != nil {
		return store.Sandbox{}, err
	}
	spec := sandbox.Spec{ID: rec.ID, Template: rec.Template, Limits: limits, Env: rec.Env, Group: rec.ID, QuotaBytes: rec.QuotaBytes, Network: req.Network}
	if snap, err := l.snapshotAsSource(ctx, req.Team, req.Template); err != nil {
		return store.Sandbox{}, err
	} else if snap != nil {
		if err := l.forkFrom(ctx, req, *snap, &rec, &spec); err != nil {
			return store.Sandbox{}, err
		}
		keepLineage(&rec, req.adopted)
	}
	tmpl, err := l.templateOf(ctx, rec.Template)
	if err != nil {
		return store.Sandbox{}, err
	}
	if err := settleTemplate(tmpl, &req, &rec, &spec); err != nil {
		return store.Sandbox{}, err
	}
	if req.TemplateLabel != "" && spec.Snapshot != "" {
		// Set after settling: the root template decides the runtime.
		rec.Template = req.TemplateLabel
	}
	timeout := l.cfg.DefaultTimeout
	if req.Timeout != nil {
		timeout = *req.Timeout
	}
	if timeout > 0 {
		rec.EndAt = now.Add(timeout)
	}

	if spec.Snapshot == "" && len(rec.VolumeMounts) == 0 && len(req.Devices) == 0 {
		// A pooled sandbox started without volumes.
		if e, ok := l.warm.claim(ctx, req, rec.Runtime, tmpl); ok {
			return l.warm.claimed(ctx, e, rec, now)
		}
	}
	if spec.Snapshot != "" {
		// The snapshot's volume must be in the pool (restored if archived)
		// for as long as the copy takes.
		release, err := l.volumes.useSnapshots(ctx, store.Snapshot{ID: spec.Snapshot})
		if err != nil {
			return store.Sandbox{}, err
		}
		defer release()
	}
	if err := l.reserve(ctx, rec, req, spec); err != nil {
		return store.Sandbox{}, err
	}
	sb, err := l.host.Create(ctx, spec)
	if err != nil {
		bg := context.WithoutCancel(ctx)
		l.devices.release(bg, rec.ID)
		if errdefs.IsNotFound(err) || errdefs.IsInvalid(err) || errdefs.IsUnsupported(err) {
			// The request was wrong: leave no trace of it.
			if derr := l.store.DeleteSandbox(bg, rec.ID); derr != nil {
				l.log.Warn("drop record of a rejected sandbox", "sandbox", rec.ID, "err", derr)
			}
			return store.Sandbox{}, err
		}
		l.fail(bg, rec.ID, err.Error())
		return store.Sandbox{}, fmt.Errorf("create sandbox: %w", err)
	}
	if err := restoredEnv(ctx, l, rec, spec, sb); err != nil {
		return store.Sandbox{}, err
	}
	return l.started(ctx, rec, spec, sb)
}

// restoredEnv gives a sandbox restored from memory its own variables: its
// agent came back with the environment of the sandbox the memory was
// saved from (a template's build sandbox has none of the create's). A
// fork's are its parent's, so setting them again changes nothing. If that
// fails the sandbox goes. (A function: lifecycle has methods enough.)
func restoredEnv(ctx context.Context, l *lifecycle, rec store.Sandbox, spec sandbox.Spec, sb *sandbox.Sandbox) error {
	if spec.MemoryFrom == "" || spec.Hibernate || len(rec.Env) == 0 {
		return nil
	}
	if err := l.host.SetEnv(ctx, sb, rec.Env); err != nil {
		bg := context.WithoutCancel(ctx)
		_ = l.host.Destroy(bg, rec.ID, sb.Agent)
		l.fail(bg, rec.ID, "set its env after the restore: "+err.Error())
		return fmt.Errorf("set the env of sandbox %s restored from memory: %w", rec.ID, err)
	}
	return nil
}

// settleTemplate applies what the template asks of its sandboxes: the
// runtime it requires and, for a create that asks for none, its devices
// (a fork asks for its own).
func settleTemplate(tmpl store.Template, req *CreateRequest, rec *store.Sandbox, spec *sandbox.Spec) error {
	if need := tmpl.Runtime; need != "" {
		if req.Runtime != "" && req.Runtime != need {
			return fmt.Errorf("template %s requires the %s runtime; drop runtime %q or ask for %q: %w", rec.Template, need, req.Runtime, need, errdefs.ErrInvalid)
		}
		// A restore from memory stays on the runtime that saved it (the
		// only one that can read the image), even if the template was
		// rebuilt with another requirement since.
		if spec.MemoryFrom == "" {
			rec.Runtime = need
		}
	}
	spec.Runtime = rec.Runtime
	if len(req.Devices) == 0 && spec.Snapshot == "" {
		req.Devices = tmpl.Devices
	}
	return nil
}

// resolveVolumes checks the volumes a create mounts and puts them, with
// their ids, in its record.
func resolveVolumes(ctx context.Context, vols VolumeResolver, req CreateRequest, rec *store.Sandbox) error {
	if len(req.VolumeMounts) == 0 {
		return nil
	}
	if vols == nil {
		return fmt.Errorf("this server has no shared volumes: %w", errdefs.ErrUnsupported)
	}
	mounts, err := vols.ResolveMounts(ctx, req.Team, req.VolumeMounts)
	if err != nil {
		return err
	}
	rec.VolumeMounts = mounts
	return nil
}

// newRecord is the record of a sandbox a create asks for, before its
// source (template or snapshot) and runtime are settled.
func (l *lifecycle) newRecord(req CreateRequest, limits runtime.Limits, now time.Time) store.Sandbox {
	rec := store.Sandbox{
		ID:                 ids.New(20),
		Team:               req.Team,
		Template:           req.Template,
		Runtime:            l.cfg.RuntimeName,
		State:              StateCreating,
		Metadata:           req.Metadata,
		Env:                req.Env,
		MemoryBytes:        limits.MemoryBytes,
		CPUMillis:          limits.CPUMillis,
		Pids:               limits.Pids,
		QuotaBytes:         req.DiskBytes,
		AutoPause:          req.AutoPause,
		AutoResume:         req.AutoResume,
		AutoPauseFilesOnly: req.AutoPauseFilesOnly,
		PublicPorts:        req.PublicPorts,
		MaskRequestHost:    req.MaskRequestHost,
		ToolSnapshots:      req.ToolSnapshots,
		Network:            storedPolicy(req.Network),
		CreatedAt:          now,
		IdempotencyKey:     req.IdempotencyKey,
		UpdatedAt:          now,
		StartedAt:          now,
	}
	rec.Family = rec.ID
	if req.adopted != nil {
		rec.ID, rec.Family = req.adopted.ID, req.adopted.ID
	}
	if req.Runtime != "" {
		rec.Runtime = req.Runtime
	}
	return rec
}

// forkFrom makes a create start from one of the team's snapshots: the
// record joins the snapshot's family and keeps its parent's runtime, and a
// snapshot with memory restores its processes (on the runtime that saved
// them) unless the request asks for its files only.
func (l *lifecycle) forkFrom(ctx context.Context, req CreateRequest, snap store.Snapshot, rec *store.Sandbox, spec *sandbox.Spec) error {
	rec.Template = snap.Template
	rec.Family = snap.Family
	rec.ForkedFrom = snap.ID
	rec.ParentSandbox = snap.SandboxID
	rec.Head = snap.ID
	spec.Template, spec.Snapshot = snap.Template, snap.ID
	if parent, err := l.store.GetSandbox(ctx, snap.SandboxID); err == nil && req.Runtime == "" && parent.Runtime != "" {
		rec.Runtime = parent.Runtime // a fork keeps its parent's runtime
	}
	if snap.MemoryBytes > 0 && !req.FilesOnly {
		rt, ok := l.host.MemoryImage(snap.ID)
		if !ok {
			return fmt.Errorf("snapshot %s's memory image is missing; start from its files only (filesOnly): %w", snap.ID, errdefs.ErrNotFound)
		}
		if rt != "" {
			// Only the runtime that saved the memory can restore it.
			if req.Runtime != "" && req.Runtime != rt {
				return fmt.Errorf("snapshot %s holds memory saved by the %s runtime, which alone can restore it; drop runtime %q or ask for filesOnly: %w", snap.ID, rt, req.Runtime, errdefs.ErrInvalid)
			}
			rec.Runtime = rt
		}
		spec.MemoryFrom = snap.ID
		spec.Hibernate = req.hibernated
	}
	return nil
}

// started records a created sandbox as running (hibernated, if made so)
// and live, with its event and lineage edge; if the record cannot be
// updated the sandbox goes.
func (l *lifecycle) started(ctx context.Context, rec store.Sandbox, spec sandbox.Spec, sb *sandbox.Sandbox) (store.Sandbox, error) {
	state := StateRunning
	if spec.Hibernate {
		state = StateHibernated
	}
	if err := l.store.UpdateSandboxState(ctx, rec.ID, []store.SandboxState{StateCreating}, state, ""); err != nil {
		_ = l.host.Destroy(context.WithoutCancel(ctx), rec.ID, sb.Agent)
		l.fail(context.WithoutCancel(ctx), rec.ID, "record update failed: "+err.Error())
		return store.Sandbox{}, err
	}
	now := l.cfg.Now()
	ls := &liveSandbox{Sandbox: sb, team: rec.Team, lastActive: now}
	if spec.Hibernate {
		ls.paused, ls.hibernated, ls.pausedAt = true, true, now
	}
	l.mu.Lock()
	l.live[rec.ID] = ls
	l.mu.Unlock()
	created := "from template " + rec.Template
	switch {
	case spec.Hibernate:
		created = "from snapshot " + rec.Head + " with its memory: processes held on disk until resumed"
	case rec.ForkedFrom != "":
		created = "forked from snapshot " + rec.ForkedFrom
		if spec.MemoryFrom != "" {
			created += " with its memory: processes restored"
		}
	}
	l.event(ctx, rec, "created", "", state, CauseAPI, created)
	rec.State = state
	if rec.ForkedFrom != "" {
		l.edge(context.WithoutCancel(ctx), rec.Family, EdgeForkedFrom, rec.ID, rec.ForkedFrom)
	} else {
		l.edge(context.WithoutCancel(ctx), rec.Family, EdgeCreatedFrom, rec.ID, rec.Template)
	}
	return rec, nil
}

// templateOf returns the record of the template a sandbox is made from; a
// template without one (not built, or removed since a snapshot was taken
// from it) gives a zero record: the storage answers for the volume itself.
func (l *lifecycle) templateOf(ctx context.Context, name string) (store.Template, error) {
	// A built template (internal/tplbuild) is no row of the templates
	// table: its sandboxes, and snapshots of them, name it, and what they
	// must inherit (a required runtime, devices) is its root template's,
	// reached through its newest ready build's snapshot. The hops are
	// bounded: a build's parent may itself be a built template.
	for hop := 0; hop < 8; hop++ {
		t, err := l.store.GetTemplate(ctx, name)
		if !errdefs.IsNotFound(err) {
			return t, err
		}
		next, err := builtTemplateParent(ctx, l.store, name)
		if err != nil || next == "" {
			return store.Template{}, err
		}
		name = next
	}
	return store.Template{}, nil
}

// builtTemplateParent is the template a built template's newest ready
// build started from, or "" when name is no built template.
func builtTemplateParent(ctx context.Context, st lifecycleStore, name string) (string, error) {
	builds, err := st.ListTemplateBuilds(ctx, name)
	if err != nil {
		return "", err
	}
	for _, b := range builds { // newest first
		if b.Status != "ready" || b.SnapshotID == "" {
			continue
		}
		snap, err := st.GetSnapshot(ctx, b.SnapshotID)
		if errdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return "", err
		}
		return snap.Template, nil
	}
	return "", nil
}

// snapshotAsSource resolves a create's templateID that names one of the
// team's snapshots (E2B: a snapshot id is usable as a template). It returns
// nil when the name is not a snapshot id of the team.
func (l *lifecycle) snapshotAsSource(ctx context.Context, team, name string) (*store.Snapshot, error) {
	if ids.Validate("snapshot id", name) != nil {
		return nil, nil
	}
	snap, err := l.store.GetSnapshot(ctx, name)
	if errdefs.IsNotFound(err) || (err == nil && snap.Team != team) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if snap.State != SnapReady && snap.State != SnapArchived {
		return nil, fmt.Errorf("snapshot %s was deleted: %w", name, errdefs.ErrNotFound)
	}
	return &snap, nil
}

// reserve inserts the record in "creating" unless the sandbox limit is
// hit, and claims the devices the create asks for.
func (l *lifecycle) reserve(ctx context.Context, rec store.Sandbox, req CreateRequest, spec sandbox.Spec) error {
	if err := l.reserveWith(ctx, rec, func() error { return l.store.CreateSandbox(ctx, rec) }); err != nil {
		return err
	}
	return l.devices.claim(ctx, req, rec, spec)
}

// Delete destroys a team's sandbox and forgets it.
func (l *lifecycle) Delete(ctx context.Context, team, id string) error {
	unlock := l.lockSandbox(id)
	defer unlock()
	rec, err := l.Get(ctx, team, id)
	if err != nil {
		return err
	}
	return l.destroy(ctx, rec, CauseAPI)
}

func (l *lifecycle) destroy(ctx context.Context, rec store.Sandbox, cause string) error {
	ctx = context.WithoutCancel(ctx)
	if err := checkTransition(rec.ID, rec.State, StateDestroyed); err != nil {
		return err
	}
	if err := l.store.UpdateSandboxState(ctx, rec.ID, sourcesOf(StateDestroyed), StateDestroyed, ""); err != nil {
		return err
	}
	l.event(ctx, rec, "destroyed", rec.State, StateDestroyed, cause, "")
	l.mu.Lock()
	sb := l.live[rec.ID]
	delete(l.live, rec.ID)
	l.mu.Unlock()
	var conn *agentconn.Conn
	if sb != nil {
		conn = sb.Agent
	}
	if err := l.host.Destroy(ctx, rec.ID, conn); err != nil {
		// The record stays (as destroyed) so that the next start's
		// reconcile, which sees no live record, removes what is left.
		l.log.Error("destroy sandbox", "sandbox", rec.ID, "err", err)
		return fmt.Errorf("destroy sandbox %s: %w", rec.ID, err)
	}
	l.devices.release(ctx, rec.ID)
	return l.store.DeleteSandbox(ctx, rec.ID)
}

func (l *lifecycle) validate(req *CreateRequest) error {
	if err := ids.ValidateName("team", req.Team); err != nil {
		return err
	}
	if req.Template == "" {
		req.Template = "base"
	}
	if err := ids.ValidateName("templateID", req.Template); err != nil {
		return err
	}
	if req.AutoPauseFilesOnly && req.AutoResume {
		// E2B's words (its SDK refuses the same before sending).
		return fmt.Errorf("autoResume cannot be enabled with autoPauseMemory false: a filesystem-only pause cannot be auto-resumed by traffic and must be resumed explicitly with connect: %w", errdefs.ErrInvalid)
	}
	if req.Timeout != nil {
		if err := l.CheckTimeout(*req.Timeout); err != nil {
			return err
		}
	}
	if err := validateMap("metadata", req.Metadata); err != nil {
		return err
	}
	if err := validateEnv(req.Env); err != nil {
		return err
	}
	if req.DiskBytes < 0 || (req.DiskBytes > 0 && req.DiskBytes < 16<<20) {
		return fmt.Errorf("disk quota must be 0 (none) or at least 16 MiB: %w", errdefs.ErrInvalid)
	}
	if l.cfg.MaxDiskBytes > 0 && req.DiskBytes > l.cfg.MaxDiskBytes {
		return fmt.Errorf("disk quota %d MiB is above this server's maximum of %d MiB: %w", req.DiskBytes>>20, l.cfg.MaxDiskBytes>>20, errdefs.ErrInvalid)
	}
	lim, max := req.Limits, l.cfg.MaxLimits
	switch {
	case lim.MemoryBytes < 0 || lim.CPUMillis < 0 || lim.Pids < 0:
		return fmt.Errorf("limits must not be negative: %w", errdefs.ErrInvalid)
	case lim.MemoryBytes != 0 && lim.MemoryBytes < 16<<20:
		return fmt.Errorf("memory limit %d MiB is below the minimum of 16 MiB: %w", lim.MemoryBytes>>20, errdefs.ErrInvalid)
	case max.MemoryBytes > 0 && lim.MemoryBytes > max.MemoryBytes:
		return fmt.Errorf("memory limit %d MiB is above this server's maximum of %d MiB: %w", lim.MemoryBytes>>20, max.MemoryBytes>>20, errdefs.ErrInvalid)
	case lim.CPUMillis != 0 && lim.CPUMillis < 10:
		return fmt.Errorf("cpu limit below 0.01 CPU: %w", errdefs.ErrInvalid)
	case max.CPUMillis > 0 && lim.CPUMillis > max.CPUMillis:
		return fmt.Errorf("cpu limit %.2f is above this server's maximum of %.2f CPUs: %w", float64(lim.CPUMillis)/1000, float64(max.CPUMillis)/1000, errdefs.ErrInvalid)
	case lim.Pids != 0 && lim.Pids < 16:
		return fmt.Errorf("pids limit %d is below the minimum of 16: %w", lim.Pids, errdefs.ErrInvalid)
	case max.Pids > 0 && lim.Pids > max.Pids:
		return fmt.Errorf("pids limit %d is above this server's maximum of %d: %w", lim.Pids, max.Pids, errdefs.ErrInvalid)
	}
	return l.net.checkNetwork(req.Network)
}

// limitsOf reads a sandbox's limits from its record.
func limitsOf(rec store.Sandbox) runtime.Limits {
	return runtime.Limits{MemoryBytes: rec.MemoryBytes, CPUMillis: rec.CPUMillis, Pids: rec.Pids}
}

const (
	maxMapEntries = 64
	maxKeyLen     = 256
	maxValueLen   = 4096
)

func validateMap(what string, kv map[string]string) error {
	if len(kv) > maxMapEntries {
		return fmt.Errorf("%s has %d entries, at most %d allowed: %w", what, len(kv), maxMapEntries, errdefs.ErrInvalid)
	}
	for k, v := range kv {
		if k == "" || len(k) > maxKeyLen {
			return fmt.Errorf("%s key %.32q must be 1..%d bytes: %w", what, k, maxKeyLen, errdefs.ErrInvalid)
		}
		if len(v) > maxValueLen {
			return fmt.Errorf("%s value of %q is longer than %d bytes: %w", what, k, maxValueLen, errdefs.ErrInvalid)
		}
	}
	return nil
}

func validateEnv(env map[string]string) error {
	if err := validateMap("envVars", env); err != nil {
		return err
	}
	for k, v := range env {
		for i := 0; i < len(k); i++ {
			c := k[i]
			ok := c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (i > 0 && c >= '0' && c <= '9')
			if !ok {
				return fmt.Errorf("envVars name %q must match [A-Za-z_][A-Za-z0-9_]*: %w", k, errdefs.ErrInvalid)
			}
		}
		for i := 0; i < len(v); i++ {
			if v[i] == 0 {
				return fmt.Errorf("envVars value of %q holds a NUL byte: %w", k, errdefs.ErrInvalid)
			}
		}
	}
	return nil
}
