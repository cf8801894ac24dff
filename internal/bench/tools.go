package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon"
	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/template"
)

// ToolsOptions configure the tools suite.
type ToolsOptions struct {
	Options
	// Calls is the round trips of each small tool call measured.
	Calls int
	// GrepFiles is the size of the tree grep searches; GrepRuns the
	// searches timed for each of the tool and the baseline.
	GrepFiles int
	GrepRuns  int
	// Progress, if set, hears what the suite is doing.
	Progress io.Writer
}

// ToolsReport is the tools suite's answer.
type ToolsReport struct {
	Machine  string `json:"machine"`
	Template string `json:"template"`
	// Read4KiB and Edit: POST /sandboxes/{id}/tools/read of a 4 KiB file,
	// and /tools/edit of one word in it, over HTTP, as the API's client
	// sees them.
	Read4KiB Stats `json:"read_4kib"`
	Edit     Stats `json:"edit"`
	// Grep searches GrepFiles text files for a pattern found in a few of
	// them: the grep tool through the API against GNU grep (or the
	// template's grep) run inside the same sandbox through the exec API,
	// both with a warm page cache.
	GrepFiles    int     `json:"grep_files"`
	GrepBaseline string  `json:"grep_baseline"`
	GrepTool     Stats   `json:"grep_tool"`
	GrepNative   Stats   `json:"grep_native"`
	GrepRatioP50 float64 `json:"grep_ratio_p50"`
	Targets      struct {
		ReadP50Ms    float64 `json:"read_p50_ms"`
		EditP50Ms    float64 `json:"edit_p50_ms"`
		GrepRatioP50 float64 `json:"grep_ratio_p50"`
	} `json:"targets"`
	Met bool `json:"met"`
}

// grepNeedle is the pattern the grep item looks for; one file in 997 holds
// it.
const grepNeedle = `needle_[0-9]+\(`

// RunTools measures the agent tools through the API.
func RunTools(ctx context.Context, opts ToolsOptions) (_ ToolsReport, retErr error) {
	opts.defaults()
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	h, err := startHarness(ctx, opts.Options, func(cfg *config.Config) {
		cfg.ImageSize = 8 << 30
		cfg.DefaultDiskBytes = 0 // the grep tree is written from the host, whatever its size
	})
	if err != nil {
		return ToolsReport{}, err
	}
	defer func() { retErr = errors.Join(retErr, h.close()) }()
	// GNU grep is the baseline: it is in a Debian template (built from
	// debootstrap's cache when there is one, ~20 s; else fetched). Without
	// one, the busybox template's grep stands in, and the report says so.
	if opts.Template == "" {
		fmt.Fprintln(progress, "tools: building a Debian template for GNU grep")
		if _, err := h.d.Templates.Build(ctx, "bench-debian", template.BaseSource(), daemon.BuildOptions{Replace: true, Progress: progress}); err == nil {
			h.tmpl = "bench-debian"
		} else {
			fmt.Fprintf(progress, "tools: no Debian template (%v); busybox grep is the baseline\n", err)
		}
	}
	rep := ToolsReport{Machine: machine(), Template: h.tmpl, GrepFiles: opts.GrepFiles}
	rep.Targets.ReadP50Ms, rep.Targets.EditP50Ms, rep.Targets.GrepRatioP50 = 2, 2, 1.5

	never := int64(0)
	sb, err := h.c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: h.tmpl, Timeout: &never})
	if err != nil {
		return rep, fmt.Errorf("create: %w", err)
	}
	id := sb.SandboxID
	call := func(tool string, params map[string]any) (client.ToolResult, time.Duration, error) {
		b, err := json.Marshal(params)
		if err != nil {
			return client.ToolResult{}, 0, err
		}
		start := time.Now()
		res, err := h.c.Tools.Call(ctx, id, tool, client.ToolCall{Params: b}, nil)
		took := time.Since(start)
		if err == nil && res.IsError {
			err = fmt.Errorf("%s: %s", tool, res.Content)
		}
		return res, took, err
	}
	if err := measureReadEdit(call, opts.Calls, &rep); err != nil {
		return rep, err
	}
	fmt.Fprintf(progress, "tools: writing %d files to grep\n", opts.GrepFiles)
	if err := measureGrep(ctx, h, id, call, opts, &rep); err != nil {
		return rep, err
	}
	rep.Met = rep.Read4KiB.P50 <= rep.Targets.ReadP50Ms && rep.Edit.P50 <= rep.Targets.EditP50Ms && rep.GrepRatioP50 <= rep.Targets.GrepRatioP50
	return rep, nil
}

// defaults fills in the tools suite's sizes left at zero.
func (opts *ToolsOptions) defaults() {
	defaultSize(&opts.Calls, 200)
	defaultSize(&opts.GrepFiles, 100_000)
	defaultSize(&opts.GrepRuns, 5)
}

// toolCall calls one tool in the suite's sandbox and times the call; a
// result that is an error is an error.
type toolCall func(tool string, params map[string]any) (client.ToolResult, time.Duration, error)

// measureReadEdit times calls+1 reads and edits of a 4 KiB file (the first
// of each warms up).
func measureReadEdit(call toolCall, calls int, rep *ToolsReport) error {
	var text strings.Builder
	for text.Len() < 4096-40 {
		fmt.Fprintf(&text, "line %03d of a small source file, alpha\n", text.Len()/40)
	}
	path := template.Workspace + "/small.txt"
	if _, _, err := call("write", map[string]any{"path": path, "content": text.String()}); err != nil {
		return err
	}
	var reads, edits []time.Duration
	for i := 0; i < calls+1; i++ {
		_, took, err := call("read", map[string]any{"path": path})
		if err != nil {
			return err
		}
		from, to := "alpha\n", "omega\n"
		if i%2 == 1 {
			from, to = to, from
		}
		_, etook, err := call("edit", map[string]any{"path": path, "oldString": "line 007 of a small source file, " + from, "newString": "line 007 of a small source file, " + to})
		if err != nil {
			return err
		}
		if i > 0 { // the first of each warms up
			reads, edits = append(reads, took), append(edits, etook)
		}
	}
	rep.Read4KiB, rep.Edit = Summarise(reads), Summarise(edits)
	return nil
}

// measureGrep writes a tree straight into sandbox id's volume and times the
// grep tool over it against the template's grep, run as an exec; both must
// find the same matches.
func measureGrep(ctx context.Context, h *harness, id string, call toolCall, opts ToolsOptions, rep *ToolsReport) error {
	vol := h.d.Storage.Path(storage.Key{Kind: storage.KindSandbox, Name: id})
	if err := writeSourceTree(filepath.Join(vol, template.Workspace, "tree"), opts.GrepFiles); err != nil {
		return err
	}
	tree := template.Workspace + "/tree"
	out, err := h.c.Commands.ExecWait(ctx, id, client.ExecRequest{Command: "grep --version 2>/dev/null | head -1 || echo busybox grep"})
	if err != nil {
		return err
	}
	rep.GrepBaseline = strings.TrimSpace(out.Stdout)
	if rep.GrepBaseline == "" {
		rep.GrepBaseline = "busybox grep"
	}
	var tool, native []time.Duration
	var toolMatches, nativeMatches int
	for i := 0; i < opts.GrepRuns+1; i++ {
		res, took, err := call("grep", map[string]any{"pattern": grepNeedle, "path": tree, "maxResults": 5000})
		if err != nil {
			return err
		}
		start := time.Now()
		n, err := h.c.Commands.ExecWait(ctx, id, client.ExecRequest{Command: "grep -rnE '" + grepNeedle + "' " + tree + " | wc -l"})
		ntook := time.Since(start)
		if err != nil {
			return err
		}
		if i > 0 {
			tool, native = append(tool, took), append(native, ntook)
		}
		toolMatches = strings.Count(res.Content, "func needle_")
		fmt.Sscan(strings.TrimSpace(n.Stdout), &nativeMatches)
	}
	if toolMatches == 0 || toolMatches != nativeMatches {
		return fmt.Errorf("grep: the tool found %d matches, %s %d", toolMatches, rep.GrepBaseline, nativeMatches)
	}
	rep.GrepTool, rep.GrepNative = Summarise(tool), Summarise(native)
	if rep.GrepNative.P50 > 0 {
		rep.GrepRatioP50 = rep.GrepTool.P50 / rep.GrepNative.P50
	}
	return nil
}

// writeSourceTree writes n small text files that look like source code
// under root (owned by the sandbox's user), 1,000 to a directory; file i
// holds the needle when i%997 == 0.
func writeSourceTree(root string, n int) error {
	var body strings.Builder
	for i := 0; i < 40; i++ {
		fmt.Fprintf(&body, "\tresult%d := compute(input%d, options) // keeps the loop simple\n", i, i)
	}
	plain := []byte("package tree\n\nfunc f() {\n" + body.String() + "}\n")
	for i := 0; i < n; i++ {
		dir := filepath.Join(root, fmt.Sprintf("d%03d", i/1000))
		if i%1000 == 0 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("make tree dir: %w", err)
			}
			if err := os.Chown(dir, template.UserUID, template.UserGID); err != nil {
				return err
			}
		}
		data := plain
		if i%997 == 0 {
			data = fmt.Appendf(nil, "%s\nfunc needle_%d() {}\n", plain, i)
		}
		p := filepath.Join(dir, fmt.Sprintf("f%06d.go", i))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return fmt.Errorf("write tree file: %w", err)
		}
		if err := os.Chown(p, template.UserUID, template.UserGID); err != nil {
			return err
		}
	}
	if err := os.Chown(root, template.UserUID, template.UserGID); err != nil {
		return err
	}
	f, err := os.Open(root)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}
