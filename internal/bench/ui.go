package bench

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/ui"
)

// UIOptions tune the ui suite.
type UIOptions struct {
	Options
	Sandboxes  int // listed when the dashboard first paints (default 500)
	Keystrokes int // timed echoes in the terminal (default 200)
	Paints     int // page loads timed (default 5)
	Turns      int // turns taken in one sandbox before its history page is timed (default 1000)
	// BrowserDir holds firstpaint.mjs and its node_modules (playwright-core):
	// test/e2e/ui of the repository. Without it, node or chromium, the
	// first-paint figure is skipped and says why.
	BrowserDir string
	Progress   io.Writer
}

// UIReport is the dashboard's cost: the JS it ships, its first meaningful
// paint (the list's first rows) with many sandboxes, and a keystroke's echo
// through the terminal's WebSocket, the agent's PTY and back.
type UIReport struct {
	Machine   string  `json:"machine"`
	JSGzipKB  float64 `json:"js_gzip_kb"`
	TargetKB  float64 `json:"target_js_gzip_kb"`
	Sandboxes int     `json:"sandboxes"`
	// FirstPaint is navigation start to the list's first row drawn, in
	// headless chromium; FirstPaintSkipped says why it was not measured.
	FirstPaint        *Stats `json:"first_paint,omitempty"`
	FirstPaintSkipped string `json:"first_paint_skipped,omitempty"`
	// ListCall is the page's GET /sandboxes (one page of 50) within it.
	ListCall *Stats `json:"list_call,omitempty"`
	// KeystrokeEchoBrowser is a key typed into the dashboard's terminal
	// until xterm.js has drawn its echo.
	KeystrokeEchoBrowser *Stats  `json:"keystroke_echo_browser,omitempty"`
	TargetFirstPaint     float64 `json:"target_first_paint_ms"`
	// KeystrokeEcho is one byte sent to the shell until its echo is back,
	// over the same WebSocket the dashboard's terminal uses.
	KeystrokeEcho       Stats   `json:"keystroke_echo"`
	TargetKeystrokeEcho float64 `json:"target_keystroke_echo_ms"`
	// HistoryPaint is navigation start to the history page's timeline and
	// lineage tree drawn, for a sandbox with HistoryTurns turns.
	HistoryTurns int    `json:"history_turns"`
	HistoryPaint *Stats `json:"history_paint,omitempty"`
}

// RunUI measures the ui suite on a throwaway daemon under o.DataDir.
func RunUI(ctx context.Context, o UIOptions) (_ UIReport, retErr error) {
	o.Sandboxes = cmpOr(o.Sandboxes, 500)
	o.Keystrokes = cmpOr(o.Keystrokes, 200)
	o.Paints = cmpOr(o.Paints, 5)
	o.Turns = cmpOr(o.Turns, 1000)
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	rep := UIReport{Machine: machine(), TargetKB: 400, TargetFirstPaint: 1000, TargetKeystrokeEcho: 20, Sandboxes: o.Sandboxes, HistoryTurns: o.Turns}
	kb, err := jsGzipKB()
	if err != nil {
		return rep, err
	}
	rep.JSGzipKB = kb
	h, err := startHarness(ctx, o.Options, func(c *config.Config) {
		c.MaxSandboxes = max(c.MaxSandboxes, o.Sandboxes+4)
		c.ImageSize = 8 << 30
	})
	if err != nil {
		return rep, err
	}
	defer func() { retErr = errors.Join(retErr, h.close()) }()
	fmt.Fprintf(o.Progress, "ui: creating %d sandboxes\n", o.Sandboxes)
	ids, err := createMany(ctx, h, o.Sandboxes)
	if err != nil {
		return rep, err
	}
	echo, err := keystrokeEcho(ctx, h.c, ids[0], o.Keystrokes)
	if err != nil {
		return rep, err
	}
	rep.KeystrokeEcho = Summarise(echo)
	fmt.Fprintf(o.Progress, "ui: taking %d turns\n", o.Turns)
	for range o.Turns {
		if _, err := h.c.Snapshots.Turn(ctx, ids[0]); err != nil {
			return rep, fmt.Errorf("turn: %w", err)
		}
	}
	b, why := inBrowser(ctx, o, "http://"+h.addr, h.key, ids[0])
	// Absent when skipped: a figure without samples.
	rep.FirstPaintSkipped = why
	if why == "" {
		paint, list, echo := Summarise(durations(b.Paints)), Summarise(durations(b.Lists)), Summarise(durations(b.Echoes))
		rep.FirstPaint, rep.ListCall, rep.KeystrokeEchoBrowser = &paint, &list, &echo
		hist := Summarise(durations(b.History))
		rep.HistoryPaint = &hist
	}
	return rep, nil
}

func cmpOr(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// jsGzipKB is the gzipped size of the dashboard's JavaScript.
func jsGzipKB() (float64, error) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	err := fs.WalkDir(ui.Files(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".js") {
			return err
		}
		b, err := fs.ReadFile(ui.Files(), p)
		if err == nil {
			_, err = zw.Write(b)
		}
		return err
	})
	if err := errors.Join(err, zw.Close()); err != nil {
		return 0, err
	}
	return round2(float64(buf.Len()) / 1024), nil
}

// createMany starts n sandboxes, eight at a time.
func createMany(ctx context.Context, h *harness, n int) ([]string, error) {
	ids := make([]string, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			sb, err := h.c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: h.tmpl, Metadata: map[string]string{"bench": "ui", "n": fmt.Sprint(i)}})
			ids[i], errs[i] = sb.SandboxID, err
		}()
	}
	wg.Wait()
	return ids, errors.Join(errs...)
}

// keystrokeEcho types n characters into a shell (echo on, as a terminal
// has it) and times each one's echo.
func keystrokeEcho(ctx context.Context, c *client.Client, id string, n int) ([]time.Duration, error) {
	t, err := c.Sandboxes.Terminal(ctx, id, 200, 50)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	// Wait for the prompt, so the shell reads what follows.
	if _, err := t.Write([]byte("echo rea''dy\n")); err != nil {
		return nil, err
	}
	if err := readUntil(t, "ready"); err != nil {
		return nil, err
	}
	out := make([]time.Duration, 0, n)
	for i := range n {
		ch := string(rune('a' + i%26))
		start := time.Now()
		if _, err := t.Write([]byte(ch)); err != nil {
			return nil, err
		}
		if err := readUntil(t, ch); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
		if i%60 == 59 { // keep the line short: erase it
			if _, err := t.Write([]byte{0x15}); err != nil {
				return nil, err
			}
			if err := readUntil(t, "$ "); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// readUntil reads the terminal's output until it holds want.
func readUntil(t *client.Terminal, want string) error {
	var got []byte
	for !bytes.Contains(got, []byte(want)) {
		data, exit, err := t.Next()
		if err != nil {
			return err
		}
		if exit != nil {
			return fmt.Errorf("the shell exited (%d %s) before %q", exit.Code, exit.Error, want)
		}
		got = append(got, data...)
	}
	return nil
}

// browserTimes are firstpaint.mjs's figures, in milliseconds.
type browserTimes struct{ Paints, Lists, Echoes, History []float64 }

// inBrowser runs firstpaint.mjs, which loads the dashboard in headless
// chromium Paints times (the time to the first row, and the list call's),
// then the history page of historyID as often, then times keystrokes'
// echoes in a terminal; "why" says why it did not run.
func inBrowser(ctx context.Context, o UIOptions, url, key, historyID string) (b browserTimes, why string) {
	script := filepath.Join(o.BrowserDir, "firstpaint.mjs")
	if _, err := os.Stat(filepath.Join(o.BrowserDir, "node_modules", "playwright-core")); err != nil {
		return b, fmt.Sprintf("no playwright-core in %s (make ui-deps; --ui-browser-dir)", o.BrowserDir)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return b, "node is not installed"
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		return b, "chromium is not installed (make deps)"
	}
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = o.BrowserDir
	cmd.Env = append(os.Environ(), "WARREN_URL="+url, "WARREN_KEY="+key, "CHROMIUM="+chromium, fmt.Sprintf("PAINTS=%d", o.Paints), fmt.Sprintf("ECHOES=%d", min(o.Keystrokes, 100)), "HISTORY_ID="+historyID)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return b, fmt.Sprintf("firstpaint.mjs: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	if err := json.Unmarshal(out, &b); err != nil {
		return b, fmt.Sprintf("firstpaint.mjs printed %q: %v", out, err)
	}
	return b, ""
}

func durations(ms []float64) []time.Duration {
	d := make([]time.Duration, len(ms))
	for i, m := range ms {
		d[i] = time.Duration(m * float64(time.Millisecond))
	}
	return d
}
