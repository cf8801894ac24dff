package bench

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
)

// TemplatesOptions tune the templates suite.
type TemplatesOptions struct {
	Options
	Rounds int // rebuilds timed of each kind
	CopyMB int // the copy step's files
}

// TemplatesReport is what the step cache buys (issue 29): a rebuild with
// every step cached, one whose last step changed beside that step run
// alone in a sandbox (the naive baseline), and the upload of an unchanged
// copy (no bytes sent).
type TemplatesReport struct {
	Machine          string  `json:"machine"`
	Steps            int     `json:"steps"`
	CopyMB           int     `json:"copy_mb"`
	FirstBuildMs     float64 `json:"first_build_ms"`
	CachedRebuild    Stats   `json:"cached_rebuild"`
	LastStepChanged  Stats   `json:"last_step_changed_rebuild"`
	LastStepAlone    Stats   `json:"baseline_last_step_exec_alone"`
	LastStepOverhead float64 `json:"last_step_overhead_p50_ms"`
	FirstUploadMs    float64 `json:"first_upload_ms"`
	UnchangedUpload  Stats   `json:"unchanged_upload_check"`
	UnchangedBytes   int64   `json:"unchanged_upload_bytes_sent"`
	TargetCachedMs   float64 `json:"target_cached_rebuild_ms"`
	TargetOverheadMs float64 `json:"target_last_step_overhead_ms"`
	// StartCommand: create → server answering, start command snapshotted
	// with memory (gvisor) vs run at each create (templates_start.go).
	StartCommand TemplateStartReport `json:"start_command"`
	// SlowStartCommand: the same with a server that warms up for 1 s.
	SlowStartCommand TemplateStartReport `json:"slow_start_command"`
}

// RunTemplates measures the templates suite on a throwaway daemon.
func RunTemplates(ctx context.Context, o TemplatesOptions) (_ TemplatesReport, retErr error) {
	if o.Rounds <= 0 {
		o.Rounds = 10
	}
	if o.CopyMB <= 0 {
		o.CopyMB = 100
	}
	rep := TemplatesReport{Machine: machine(), CopyMB: o.CopyMB, TargetCachedMs: 2000, TargetOverheadMs: 1000}
	h, err := startHarness(ctx, o.Options, func(cfg *config.Config) { cfg.ImageSize = 4 << 30 })
	if err != nil {
		return rep, err
	}
	defer func() { retErr = errors.Join(retErr, h.close()) }()
	api := tplAPI{base: "http://" + h.addr, key: h.key}
	var req struct{ TemplateID, BuildID string }
	if err := api.call(ctx, "POST", "/v3/templates", map[string]any{"name": "bench-tpl"}, &req); err != nil {
		return rep, err
	}
	hash, err := uploadCopy(ctx, api, req.TemplateID, o.CopyMB, &rep)
	if err != nil {
		return rep, err
	}
	steps := func(last string) []map[string]any {
		return []map[string]any{
			{"type": "WORKDIR", "args": []string{"/"}},
			{"type": "USER", "args": []string{"root"}},
			{"type": "COPY", "args": []string{"data", "/data/"}, "filesHash": hash},
			{"type": "RUN", "args": []string{"echo one > /one"}},
			{"type": "RUN", "args": []string{last}},
		}
	}
	rep.Steps = len(steps(""))
	spec := func(last string) map[string]any { return map[string]any{"fromTemplate": h.tmpl, "steps": steps(last)} }
	first, err := api.build(ctx, req.TemplateID, req.BuildID, spec("echo 0 > /v"))
	if err != nil {
		return rep, err
	}
	rep.FirstBuildMs = ms(first)
	var cached, changed []time.Duration
	for i := 1; i <= o.Rounds; i++ {
		d, err := api.rebuild(ctx, spec("echo 0 > /v"))
		if err != nil {
			return rep, err
		}
		cached = append(cached, d)
		if d, err = api.rebuild(ctx, spec(fmt.Sprintf("echo %d > /v", i))); err != nil {
			return rep, err
		}
		changed = append(changed, d)
	}
	alone, err := stepAlone(ctx, h, o.Rounds)
	if err != nil {
		return rep, err
	}
	rep.CachedRebuild, rep.LastStepChanged, rep.LastStepAlone = Summarise(cached), Summarise(changed), Summarise(alone)
	rep.LastStepOverhead = round2(rep.LastStepChanged.P50 - rep.LastStepAlone.P50)
	if rep.StartCommand, err = measureStartModes(ctx, h, api, "bench-start", benchStartCmd, o.Rounds); err != nil {
		return rep, err
	}
	rep.SlowStartCommand, err = measureStartModes(ctx, h, api, "bench-slow-start", benchSlowStartCmd, o.Rounds)
	return rep, err
}

// stepAlone times the last step's command run in a sandbox of the
// template: what a rebuild of one changed step cannot do with less.
func stepAlone(ctx context.Context, h *harness, rounds int) ([]time.Duration, error) {
	sb, err := h.c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: h.tmpl})
	if err != nil {
		return nil, err
	}
	defer h.c.Sandboxes.Delete(context.WithoutCancel(ctx), sb.SandboxID)
	var out []time.Duration
	for i := 0; i < rounds; i++ {
		t0 := time.Now()
		if _, err := h.c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Command: fmt.Sprintf("echo %d > /v", i), User: "root"}); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}

// uploadCopy uploads a tar of mb MiB of random data once, then times the
// SDK's check for an unchanged copy (which sends nothing).
func uploadCopy(ctx context.Context, api tplAPI, templateID string, mb int, rep *TemplatesReport) (string, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	data := make([]byte, mb<<20)
	if _, err := rand.Read(data); err != nil {
		return "", err
	}
	_ = tw.WriteHeader(&tar.Header{Name: "data/", Typeflag: tar.TypeDir, Mode: 0o755})
	_ = tw.WriteHeader(&tar.Header{Name: "data/blob", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))})
	_, _ = tw.Write(data)
	if err := tw.Close(); err != nil {
		return "", err
	}
	sum := sha256.Sum256(buf.Bytes())
	hash := hex.EncodeToString(sum[:])
	t0 := time.Now()
	if err := api.upload(ctx, templateID, hash, buf.Bytes()); err != nil {
		return "", err
	}
	rep.FirstUploadMs = ms(time.Since(t0))
	var checks []time.Duration
	for i := 0; i < 20; i++ {
		t0 := time.Now()
		var link struct{ Present bool }
		if err := api.call(ctx, "GET", "/templates/"+templateID+"/files/"+hash, nil, &link); err != nil {
			return "", err
		}
		if !link.Present {
			return "", fmt.Errorf("an uploaded copy is not present")
		}
		checks = append(checks, time.Since(t0))
	}
	rep.UnchangedUpload, rep.UnchangedBytes = Summarise(checks), 0
	return hash, nil
}

// tplAPI speaks the template build API as the SDK does.
type tplAPI struct{ base, key string }

func (a tplAPI) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	return a.do(ctx, method, path, body, out)
}

func (a tplAPI) upload(ctx context.Context, templateID, hash string, tarball []byte) error {
	return a.do(ctx, "PUT", "/templates/"+templateID+"/files/"+hash, bytes.NewReader(tarball), nil)
}

func (a tplAPI) do(ctx context.Context, method, path string, body io.Reader, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("X-API-Key", a.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// rebuild requests a new build of the bench template and times it from
// the request to ready.
func (a tplAPI) rebuild(ctx context.Context, spec map[string]any) (time.Duration, error) {
	t0 := time.Now()
	var req struct{ TemplateID, BuildID string }
	if err := a.call(ctx, "POST", "/v3/templates", map[string]any{"name": "bench-tpl"}, &req); err != nil {
		return 0, err
	}
	if _, err := a.build(ctx, req.TemplateID, req.BuildID, spec); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// build starts a requested build and polls its status until it ends.
func (a tplAPI) build(ctx context.Context, templateID, buildID string, spec map[string]any) (time.Duration, error) {
	t0 := time.Now()
	if err := a.call(ctx, "POST", "/v2/templates/"+templateID+"/builds/"+buildID, spec, nil); err != nil {
		return 0, err
	}
	for {
		var st struct {
			Status string
			Reason *struct{ Message string }
		}
		if err := a.call(ctx, "GET", "/templates/"+templateID+"/builds/"+buildID+"/status?logsOffset=1000000", nil, &st); err != nil {
			return 0, err
		}
		switch st.Status {
		case "ready":
			return time.Since(t0), nil
		case "error":
			if st.Reason != nil {
				return 0, fmt.Errorf("bench build failed: %s", st.Reason.Message)
			}
			return 0, fmt.Errorf("bench build failed")
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
