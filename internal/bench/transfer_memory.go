package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/snapbundle"
)

// MemoryMoveReport is the transfer suite's move of a gvisor sandbox with
// its memory: a sandbox holding HeldMB MB is hibernated, then moved back
// and forth between the two daemons as a fleet's gateway moves it (the
// source's POST /sandboxes/{id}/export piped into the target's POST
// /sandboxes/adopt, then the source's forget), resumed on the target with
// its process, and hibernated again for the next round.
type MemoryMoveReport struct {
	// Skipped says why the item did not run (no gvisor here).
	Skipped     string `json:"skipped,omitempty"`
	HeldMB      int    `json:"held_mb"`
	ImageBytes  int64  `json:"memory_image_bytes"`
	BundleBytes int64  `json:"bundle_bytes"`
	// Move is export → adopt → forget; its rates are of BundleBytes.
	Move Throughput `json:"move_with_memory"`
	// Resume is the target's POST /resume of the moved sandbox (the
	// restore of its processes); Hibernate the checkpoint before a move.
	Resume    Stats `json:"resume_after_move"`
	Hibernate Stats `json:"hibernate"`
}

// runMemoryMove is the transfer suite's memory move item.
func (s *transferSuite) runMemoryMove(ctx context.Context) error {
	rep := &MemoryMoveReport{HeldMB: s.opts.MemoryMB}
	s.rep.MemoryMove = rep
	if s.opts.MemoryMB <= 0 {
		rep.Skipped = "--transfer-memory-mb 0"
		return nil
	}
	health, err := s.a.c.Meta.Health(ctx)
	if err != nil {
		return err
	}
	if gv, ok := findRuntime(health, "gvisor"); !ok || !gv.Available {
		rep.Skipped = "the gvisor runtime is not available here (build runsc with `make runsc`, set WARREN_RUNSC)"
		return nil
	}
	never := int64(0)
	sb, err := s.a.c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: s.a.tmpl, Runtime: "gvisor", Timeout: &never,
		Limits: &client.Limits{MemoryMB: int64(2*s.opts.MemoryMB + 512)}})
	if err != nil {
		return fmt.Errorf("create a gvisor sandbox: %w", err)
	}
	if err := holdMemory(ctx, s.a.c, sb.SandboxID, s.opts.MemoryMB); err != nil {
		return err
	}
	var moves, resumes, hibernates []time.Duration
	from, to := s.a, s.b
	for range max(s.opts.Rounds, 1) {
		start := time.Now()
		if _, err := from.c.Lifecycle.Hibernate(ctx, sb.SandboxID); err != nil {
			return fmt.Errorf("hibernate: %w", err)
		}
		hibernates = append(hibernates, time.Since(start))
		start = time.Now()
		n, image, err := moveSandbox(ctx, from, to, sb.SandboxID)
		if err != nil {
			return err
		}
		moves = append(moves, time.Since(start))
		rep.BundleBytes, rep.ImageBytes = n, image
		if image == 0 {
			return fmt.Errorf("the move's bundle carried no memory image")
		}
		start = time.Now()
		if _, err := to.c.Lifecycle.Resume(ctx, sb.SandboxID); err != nil {
			return fmt.Errorf("resume the moved sandbox: %w", err)
		}
		resumes = append(resumes, time.Since(start))
		if err := heldAlive(ctx, to.c, sb.SandboxID, "the move"); err != nil {
			return err
		}
		from, to = to, from
	}
	rep.Move = throughput(rep.BundleBytes, moves)
	rep.Resume, rep.Hibernate = Summarise(resumes), Summarise(hibernates)
	return from.c.Sandboxes.Delete(ctx, sb.SandboxID)
}

// moveSandbox moves sandbox id from one daemon to the other as a fleet's
// gateway does, and returns the bundle's size and that of the memory image
// it carried (its header says).
func moveSandbox(ctx context.Context, from, to *harness, id string) (n, image int64, err error) {
	res, err := post(ctx, from, "/sandboxes/"+url.PathEscape(id)+"/export", nil, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("export sandbox %s: %w", id, err)
	}
	defer res.Body.Close()
	var head bytes.Buffer
	body := &countReader{r: io.TeeReader(res.Body, &prefixWriter{&head, 1 << 20})}
	hdr := http.Header{"X-Warren-Sandbox-Record": {res.Header.Get("X-Warren-Sandbox-Record")},
		"Content-Type": {"application/vnd.warren.snapshot-bundle"}}
	adopted, err := post(ctx, to, "/sandboxes/adopt?from=bench", body, hdr)
	if err != nil {
		return 0, 0, fmt.Errorf("adopt sandbox %s: %w", id, err)
	}
	adopted.Body.Close()
	forgot, err := post(ctx, from, "/sandboxes/"+url.PathEscape(id)+"/forget", nil, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("forget sandbox %s: %w", id, err)
	}
	forgot.Body.Close()
	if br, err := snapbundle.NewReader(&head); err == nil && br.Header.Memory != nil {
		image = br.Header.Memory.Bytes
	}
	return body.n, image, nil
}

// prefixWriter keeps the first max bytes written to it.
type prefixWriter struct {
	b   *bytes.Buffer
	max int
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	if room := p.max - p.b.Len(); room > 0 {
		p.b.Write(b[:min(room, len(b))])
	}
	return len(b), nil
}

// post sends a POST to h's API with its admin key; an answer that is not
// 2xx is an error.
func post(ctx context.Context, h *harness, path string, body io.Reader, hdr http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+h.addr+path, body)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("X-API-Key", h.key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if res.StatusCode/100 != 2 {
		defer res.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		return nil, fmt.Errorf("%s: %s", res.Status, strings.TrimSpace(string(msg)))
	}
	return res, nil
}
