package tplbuild

import (
	"context"
	"fmt"
	"strings"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/store"
)

// Start modes of a built template, as the build log, GET /templates and
// `warren template ls` name them.
const (
	// StartMemory: the start command ran once, in the build; its sandboxes
	// restore a snapshot with memory taken once it was ready.
	StartMemory = "start command snapshotted with memory"
	// StartEachCreate: every create runs the start command and waits for
	// its ready command (a runtime that cannot save memory: native).
	StartEachCreate = "start command run at each create"
)

// StartMode says how a build's sandboxes get its start command running
// ("" when it has none).
func StartMode(b store.TemplateBuild) string {
	switch {
	case b.StartCmd == "":
		return ""
	case b.MemorySnapshotID != "":
		return StartMemory
	}
	return StartEachCreate
}

// checkRuntime refuses a build's runtime this server cannot run ("" is the
// server's default, or what the parent template requires).
func checkRuntime(runtimes []client.RuntimeInfo, name string) error {
	if name == "" {
		return nil
	}
	names := make([]string, 0, len(runtimes))
	for _, rt := range runtimes {
		names = append(names, rt.Name)
		if rt.Name != name {
			continue
		}
		if !rt.Available {
			return fmt.Errorf("runtime %q is not available on this server (%s): build on another runtime or drop \"runtime\": %w", name, rt.Error, errdefs.ErrInvalid)
		}
		return nil
	}
	return fmt.Errorf("runtime %q: want one of %s: %w", name, strings.Join(names, ", "), errdefs.ErrInvalid)
}

// savesMemory says whether sandboxes on the runtime named name can be
// snapshotted with memory here.
func savesMemory(runtimes []client.RuntimeInfo, name string) bool {
	for _, rt := range runtimes {
		if rt.Name == name || (name == "" && rt.Default) {
			return rt.Available && rt.MemorySnapshot
		}
	}
	return false
}

// snapshotStart takes a snapshot with memory of the build sandbox, its
// start command ready, when its runtime can save memory: a create of the
// template restores it with the server running. Otherwise (or when the
// snapshot fails) every create runs the start command, and the log says so.
func (r *runner) snapshotStart(ctx context.Context) {
	if !savesMemory(r.s.cfg.Runtimes, r.runtime) {
		r.log.add("info", "finalize", "The %s runtime cannot snapshot memory: the %s", orDefault(r.runtime), StartEachCreate)
		return
	}
	res, err := r.s.cfg.Sandboxes.Snapshot(ctx, r.team, r.sandbox, session.SnapshotRequest{
		Memory: true,
		Labels: map[string]string{"warren.template": r.tmpl.Name, "warren.templateBuild": r.build.ID, "warren.templateStart": "memory"},
	})
	if err != nil {
		r.log.add("warn", "finalize", "Snapshot with memory failed (%s): the %s", err, StartEachCreate)
		return
	}
	r.memSnap = res.ID
	r.log.add("info", "finalize", "Start command snapshotted with memory (snapshot %s, %d MiB of memory): sandboxes of the template start with it running",
		res.ID, res.MemoryBytes>>20)
}

func orDefault(rt string) string {
	if rt == "" {
		return "default"
	}
	return rt
}

// StartSource is what a create of build b starts from: its snapshot with
// memory (warm: the start command is running, nothing to run) when it has
// one that still exists and the create asks neither for another runtime
// nor for files only, else its files snapshot (the caller runs Start).
func (s *Service) StartSource(ctx context.Context, team string, b store.TemplateBuild, runtime string, filesOnly bool) (snapshotID string, warm bool) {
	if b.MemorySnapshotID == "" || filesOnly || (runtime != "" && runtime != b.Runtime) {
		return b.SnapshotID, false
	}
	snap, err := s.cfg.Sandboxes.GetSnapshot(ctx, team, b.MemorySnapshotID)
	if err != nil || snap.MemoryBytes <= 0 {
		return b.SnapshotID, false
	}
	return b.MemorySnapshotID, true
}

// dropMemory deletes the memory snapshots of builds no create can reach
// any more (neither a tag's nor the newest ready build), or of every
// build when all is set (the template is deleted).
func (s *Service) dropMemory(ctx context.Context, team string, tmpl store.BuiltTemplate, all bool) {
	builds, err := s.cfg.Store.ListTemplateBuilds(ctx, tmpl.ID)
	if err != nil {
		s.cfg.Log.Warn("list template builds", "template", tmpl.ID, "err", err)
		return
	}
	keep := map[string]bool{}
	if !all {
		keep, err = reachable(ctx, s.cfg.Store, tmpl.ID, builds)
		if err != nil {
			s.cfg.Log.Warn("list template tags", "template", tmpl.ID, "err", err)
			return
		}
	}
	for _, b := range builds {
		if b.MemorySnapshotID == "" || keep[b.ID] {
			continue
		}
		if err := s.cfg.Sandboxes.DeleteSnapshot(ctx, team, b.MemorySnapshotID); err != nil && !errdefs.IsNotFound(err) {
			s.cfg.Log.Warn("drop a build's memory snapshot", "build", b.ID, "snapshot", b.MemorySnapshotID, "err", err)
			continue
		}
		if all {
			continue // the rows go with the template
		}
		b.MemorySnapshotID = ""
		if err := s.cfg.Store.PutTemplateBuild(ctx, b); err != nil {
			s.cfg.Log.Warn("record a dropped memory snapshot", "build", b.ID, "err", err)
		}
	}
}

// reachable are the builds a create can name: the tags' and the newest
// ready one.
func reachable(ctx context.Context, st Store, templateID string, builds []store.TemplateBuild) (map[string]bool, error) {
	tags, err := st.ListTemplateTags(ctx, templateID)
	if err != nil {
		return nil, err
	}
	keep := map[string]bool{}
	for _, t := range tags {
		keep[t.BuildID] = true
	}
	for _, b := range builds { // newest first
		if b.Status == StatusReady {
			keep[b.ID] = true
			break
		}
	}
	return keep, nil
}
