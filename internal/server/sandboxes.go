package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/accesstoken"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/store"
)

// recentEvents is how many of a sandbox's latest events GET /sandboxes/{id}
// shows (all of them: GET /sandboxes/{id}/events).
const recentEvents = 10

// A create sent with an Idempotency-Key header makes at most one sandbox
// per team and key: a retry is answered with the first attempt's sandbox
// and Idempotent-Replayed: true (session.CreateOnce).
const (
	idempotencyKeyHeader     = "Idempotency-Key"
	idempotentReplayedHeader = "Idempotent-Replayed"
)

// maxTimeout bounds a sandbox's run timeout (E2B allows up to 24 h on paid
// plans; a self-hosted server has no reason to be stricter).
const maxTimeout = 24 * time.Hour

// sandboxRoutes serve the sandboxes' records: create, look up, list,
// delete, and their lifecycle events (events.go).
type sandboxRoutes struct {
	sandboxViews
	records Records
	// volumes reads the shared volumes a sandbox mounts (nil: none).
	volumes VolumeAdmin
	// devices says which devices a sandbox holds (nil: none).
	devices Devices
	// builtTemplates resolves a template built from steps to its build's
	// snapshot (templatebuilds.go).
	builtTemplates *templateBuildRoutes
}

// sandboxViews turns a sandbox's record into the API's answers: its
// tokens, its domain and what its runtime can do.
type sandboxViews struct {
	domain   string
	tokens   *accesstoken.Issuer
	runtimes []client.RuntimeInfo
}

// diskUsage reads what a sandbox holds on disk and its quota.
type diskUsage interface {
	DiskUsage(ctx context.Context, id string) (used, limit int64, err error)
}

func (s *sandboxRoutes) createSandbox(w http.ResponseWriter, r *http.Request) {
	var body client.NewSandbox
	if err := decodeJSON(w, r, &body); err != nil {
		writeError(w, r, err)
		return
	}
	req := session.CreateRequest{
		Team:     teamOf(r),
		Template: body.TemplateID,
		Metadata: body.Metadata,
		Env:      body.EnvVars,

		AutoPause:  body.AutoPause,
		AutoResume: body.AutoResume != nil && body.AutoResume.Enabled,
		// Only an explicit false drops the memory: absent keeps it.
		AutoPauseFilesOnly: body.AutoPauseMemory != nil && !*body.AutoPauseMemory,

		PublicPorts: body.Network != nil && body.Network.AllowPublicTraffic != nil && *body.Network.AllowPublicTraffic,

		ToolSnapshots: body.SnapshotEveryToolCall,

		Runtime:   body.Runtime,
		FilesOnly: body.FilesOnly,

		Network: createPolicy(body),

		IdempotencyKey: r.Header.Get(idempotencyKeyHeader),

		Devices: body.Devices,
	}
	for _, m := range body.VolumeMounts {
		req.VolumeMounts = append(req.VolumeMounts, store.VolumeMount{Name: m.Name, Path: m.Path})
	}
	if body.Network != nil {
		if err := validMaskHost(body.Network.MaskRequestHost); err != nil {
			writeError(w, r, err)
			return
		}
		req.MaskRequestHost = body.Network.MaskRequestHost
	}
	timeout, err := runTimeout(s.records, body.Timeout)
	if err != nil {
		writeError(w, r, err)
		return
	}
	req.Timeout = timeout
	if l := body.Limits; l != nil {
		if l.MemoryMB < 0 || l.CPUCount < 0 || l.Pids < 0 {
			writeError(w, r, fmt.Errorf("limits must not be negative: %w", errdefs.ErrInvalid))
			return
		}
		if l.MemoryMB > 1<<30 || l.DiskMB > 1<<30 || l.DiskMB < 0 {
			writeError(w, r, fmt.Errorf("memoryMB and diskMB must be 0..%d: %w", 1<<30, errdefs.ErrInvalid))
			return
		}
		req.Limits = runtime.Limits{MemoryBytes: l.MemoryMB << 20, CPUMillis: int64(l.CPUCount * 1000), Pids: l.Pids}
		req.DiskBytes = l.DiskMB << 20
	}
	var built *store.TemplateBuild
	var warm bool
	if req.Template, built, warm, err = s.builtTemplates.resolveBuilt(r.Context(), req.Team, req.Template, req.Runtime, req.FilesOnly); err != nil {
		writeError(w, r, err)
		return
	}
	if built != nil {
		req.TemplateLabel = built.TemplateID
	}
	rec, replayed, err := s.records.CreateOnce(r.Context(), req)
	if err == nil && !replayed && !warm {
		err = s.builtTemplates.started(r.Context(), req.Team, rec.ID, built, s.records.Delete)
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	if replayed {
		w.Header().Set(idempotentReplayedHeader, "true")
	}
	writeJSON(w, http.StatusCreated, s.sandboxOf(rec))
}

func (s sandboxViews) sandboxOf(rec store.Sandbox) client.Sandbox {
	sb := client.Sandbox{
		TemplateID:  rec.Template,
		SandboxID:   rec.ID,
		ClientID:    "warren",
		EnvdVersion: EnvdVersion,
		Domain:      s.domain,
	}
	if s.tokens != nil {
		// Every sandbox is "secure": its envd API takes only its own token.
		sb.EnvdAccessToken = s.tokens.EnvdToken(rec.ID)
		if !rec.PublicPorts {
			sb.TrafficAccessToken = s.tokens.TrafficToken(rec.ID)
		}
	}
	return sb
}

func (s sandboxViews) detailOf(rec store.Sandbox) client.SandboxDetail {
	d := client.SandboxDetail{
		Sandbox:   s.sandboxOf(rec),
		StartedAt: rec.StartedAt,
		State:     visibleState(rec),
		CPUCount:  float64(rec.CPUMillis) / 1000,
		MemoryMB:  rec.MemoryBytes >> 20,
		Metadata:  rec.Metadata,
		Pids:      rec.Pids,
		Runtime:   rec.Runtime,
		Reason:    rec.Reason,

		AutoPause:       rec.AutoPause,
		AutoResume:      rec.AutoResume,
		AutoPauseMemory: autoPauseMemoryOf(rec),

		DiskSizeMB:    rec.QuotaBytes >> 20,
		DiskUsedBytes: -1,
		Family:        rec.Family,
		ForkedFrom:    rec.ForkedFrom,
		Head:          rec.Head,
		Turn:          rec.Turn,
	}
	if !rec.EndAt.IsZero() {
		end := rec.EndAt
		d.EndAt = &end
	}
	describeNetwork(&d, rec)
	for _, rt := range s.runtimes {
		if rt.Name == rec.Runtime {
			d.MemorySnapshot = rt.MemorySnapshot
		}
	}
	return d
}

func (s *sandboxRoutes) getSandbox(w http.ResponseWriter, r *http.Request) {
	rec, err := s.records.Get(r.Context(), teamOf(r), r.PathValue("id"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	d := s.detailOf(rec)
	s.builtTemplates.addAlias(r.Context(), rec.Team, &d.Sandbox)
	if evs, err := s.records.Events(r.Context(), rec.Team, rec.ID, 0, 0); err == nil {
		if len(evs) > recentEvents {
			evs = evs[len(evs)-recentEvents:]
		}
		for _, e := range evs {
			d.Events = append(d.Events, eventOfRecord(e))
		}
	}
	addDiskUsage(r, s.records, &d)
	addDevices(r, s.devices, &d)
	if s.volumes != nil {
		ms, err := s.volumes.SandboxMounts(r.Context(), rec.ID)
		if err != nil {
			writeError(w, r, err)
			return
		}
		for _, m := range ms {
			d.VolumeMounts = append(d.VolumeMounts, client.VolumeMount{Name: m.Name, Path: m.Path})
		}
	}
	writeJSON(w, http.StatusOK, d)
}

// addDiskUsage fills in what the sandbox holds on disk, and its quota as the
// storage has it, when they can be read.
func addDiskUsage(r *http.Request, disk diskUsage, d *client.SandboxDetail) {
	if used, limit, err := disk.DiskUsage(r.Context(), d.SandboxID); err == nil {
		d.DiskUsedBytes = used
		if limit > 0 {
			d.DiskSizeMB = limit >> 20
		}
	}
}

func (s *sandboxRoutes) deleteSandbox(w http.ResponseWriter, r *http.Request) {
	if err := s.records.Delete(r.Context(), teamOf(r), r.PathValue("id")); err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *sandboxRoutes) listSandboxes(w http.ResponseWriter, r *http.Request) {
	limit, err := pageLimit(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	f, err := sandboxFilterOf(r.URL.Query())
	if err == nil {
		f.Template, err = s.builtTemplates.builtTemplateID(r.Context(), teamOf(r), f.Template)
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	writePage(w, r, limit, func(n int) ([]store.Sandbox, error) {
		f.Limit = n
		return s.records.List(r.Context(), teamOf(r), f)
	}, s.detailOf)
}

// autoPauseMemoryOf is E2B's autoPauseMemory of a record: false when its
// auto-pause keeps only the files, absent otherwise.
func autoPauseMemoryOf(rec store.Sandbox) *bool {
	if !rec.AutoPauseFilesOnly {
		return nil
	}
	keep := false
	return &keep
}

// visibleState is the state a record shows. A filesystem-only pause is
// hibernated inside (no processes, files kept) but shows as paused, as
// E2B's does: its SDK knows running and paused, and a connect resumes it.
func visibleState(rec store.Sandbox) string {
	if rec.State == session.StateHibernated && rec.Reason == session.ReasonFilesOnly {
		return string(session.StatePaused)
	}
	return string(rec.State)
}
