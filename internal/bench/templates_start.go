package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/warrenhq/warren/client"
)

// TemplateStartReport is what snapshotting a template's start command with
// memory buys (issue 29): the time from a create request to the template's
// server answering on its port (through the daemon's proxy), for a
// template built on gvisor whose creates restore the server running,
// against the same template's start command run at each create, on gvisor
// (filesOnly) and on native.
type TemplateStartReport struct {
	// Skipped says why the gvisor figures are missing (no runsc).
	Skipped         string `json:"skipped,omitempty"`
	StartCmd        string `json:"start_cmd"`
	MemoryGVisor    *Stats `json:"create_to_answer_memory_gvisor,omitempty"`
	PerCreateGVisor *Stats `json:"create_to_answer_per_create_gvisor,omitempty"`
	PerCreateNative Stats  `json:"create_to_answer_per_create_native"`
	// Ratios of the p50s: per-create over memory.
	RatioGVisor float64 `json:"per_create_gvisor_over_memory_p50,omitempty"`
	RatioNative float64 `json:"per_create_native_over_memory_p50,omitempty"`
}

// The bench templates' servers (busybox httpd): one that answers as soon
// as it starts, one that first warms up for a second (as a server loading
// a model or a cache does).
const (
	benchStartCmd     = "exec httpd -f -p 8080 -h /srv"
	benchSlowStartCmd = "sleep 1; exec httpd -f -p 8080 -h /srv"
)

// measureStartModes builds a template named name with startCmd, on gvisor
// when it is available (the start command snapshotted with memory) and on
// native otherwise, and times create → server answering in each mode.
func measureStartModes(ctx context.Context, h *harness, api tplAPI, name, startCmd string, rounds int) (TemplateStartReport, error) {
	rep := TemplateStartReport{StartCmd: startCmd}
	health, err := h.c.Meta.Health(ctx)
	if err != nil {
		return rep, err
	}
	runtime := "gvisor"
	if gv, ok := findRuntime(health, "gvisor"); !ok || !gv.Available {
		rep.Skipped, runtime = "the gvisor runtime is not available here: "+gv.Error, "native"
	}
	spec := map[string]any{"fromTemplate": h.tmpl, "runtime": runtime, "startCmd": startCmd,
		"readyCmd": "wget -qO- http://127.0.0.1:8080/index.html", "steps": []map[string]any{
			{"type": "USER", "args": []string{"root"}},
			{"type": "RUN", "args": []string{"mkdir -p /srv && echo hello > /srv/index.html"}},
		}}
	var req struct{ TemplateID, BuildID string }
	if err := api.call(ctx, "POST", "/v3/templates", map[string]any{"name": name}, &req); err != nil {
		return rep, err
	}
	if _, err := api.build(ctx, req.TemplateID, req.BuildID, spec); err != nil {
		return rep, err
	}
	native, err := createToAnswer(ctx, h, client.NewSandbox{TemplateID: name, Runtime: "native"}, rounds)
	if err != nil {
		return rep, fmt.Errorf("per-create start on native: %w", err)
	}
	rep.PerCreateNative = native
	if rep.Skipped != "" {
		return rep, nil
	}
	mem, err := createToAnswer(ctx, h, client.NewSandbox{TemplateID: name}, rounds)
	if err != nil {
		return rep, fmt.Errorf("start snapshotted with memory: %w", err)
	}
	cold, err := createToAnswer(ctx, h, client.NewSandbox{TemplateID: name, Runtime: "gvisor", FilesOnly: true}, rounds)
	if err != nil {
		return rep, fmt.Errorf("per-create start on gvisor: %w", err)
	}
	rep.MemoryGVisor, rep.PerCreateGVisor = &mem, &cold
	if mem.P50 > 0 {
		rep.RatioGVisor, rep.RatioNative = round2(cold.P50/mem.P50), round2(native.P50/mem.P50)
	}
	return rep, nil
}

// createToAnswer times, rounds times, a create of ns until its server
// answers GET /index.html on port 8080 through the daemon's proxy; each
// sandbox is deleted after.
func createToAnswer(ctx context.Context, h *harness, ns client.NewSandbox, rounds int) (Stats, error) {
	var out []time.Duration
	for i := 0; i < rounds; i++ {
		t0 := time.Now()
		sb, err := h.c.Sandboxes.Create(ctx, ns)
		if err != nil {
			return Stats{}, err
		}
		err = waitAnswer(ctx, h, sb.SandboxID)
		out = append(out, time.Since(t0))
		if derr := h.c.Sandboxes.Delete(context.WithoutCancel(ctx), sb.SandboxID); err == nil {
			err = derr
		}
		if err != nil {
			return Stats{}, err
		}
	}
	return Summarise(out), nil
}

// waitAnswer polls the sandbox's port 8080 through the proxy until 200.
func waitAnswer(ctx context.Context, h *harness, id string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, "GET", "http://"+h.addr+"/index.html", nil)
		if err != nil {
			return err
		}
		req.Header.Set("X-API-Key", h.key)
		req.Header.Set("E2b-Sandbox-Id", id)
		req.Header.Set("E2b-Sandbox-Port", "8080")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sandbox %s: port 8080 never answered", id)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
