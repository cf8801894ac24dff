package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/template"
)

// MergeOptions tune the merge suite: the workspace (Files, WorkspaceMB, as
// the snapshot suite's), the files each fork changes, the rounds.
type MergeOptions struct {
	Options
	Files       int
	WorkspaceMB int
	Changed     int // files each fork changes (default 100)
	Rounds      int // rounds of two merges (default 10)
	Forks       int // forks the summary judges (default 10)
	Progress    io.Writer
}

// MergeReport is what the merge suite prints.
type MergeReport struct {
	Machine   string          `json:"machine"`
	Storage   string          `json:"storage"`
	Workspace WorkspaceReport `json:"workspace"`
	Changed   int             `json:"changed_files_per_fork"`
	// Merge times POST /sandboxes/{id}/merge of one fork into the parent
	// (two forks a round, the second's merge meeting the first's
	// changes), turn snapshots before and after included.
	Merge Stats `json:"merge"`
	// MergeDryRun is the same comparison without writes or turns.
	MergeDryRun Stats `json:"merge_dry_run"`
	// Summary times GET /sandboxes/{id}/forks/summary over Forks forks;
	// SummaryFirstMs is the first call, which sizes the fork point.
	Forks          int     `json:"summary_forks"`
	Summary        Stats   `json:"fork_summary"`
	SummaryFirstMs float64 `json:"fork_summary_first_ms"`
	// NaiveCopyMs is a baseline: the same 100 files copied one by one
	// through the files API (what a client without merge does).
	NaiveCopy  Stats   `json:"naive_copy"`
	MergeRatio float64 `json:"merge_vs_naive_copy_p50_ratio"`
}

// RunMerge runs the merge suite.
func RunMerge(ctx context.Context, o MergeOptions) (_ MergeReport, retErr error) {
	o.Changed = cmp0(o.Changed, 100)
	o.Rounds = cmp0(o.Rounds, 10)
	o.Forks = cmp0(o.Forks, 10)
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	rep := MergeReport{Machine: machine(), Changed: o.Changed, Forks: o.Forks}
	if o.Files < 2*o.Changed*(o.Rounds+1) {
		return rep, fmt.Errorf("%d files are too few for %d rounds of 2×%d changed files", o.Files, o.Rounds, o.Changed)
	}
	h, err := startHarness(ctx, o.Options, nil)
	if err != nil {
		return rep, err
	}
	defer func() { retErr = errors.Join(retErr, h.close()) }()
	rep.Storage = h.cfg.Storage
	never := int64(0)
	sb, err := h.c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: h.tmpl, Timeout: &never})
	if err != nil {
		return rep, fmt.Errorf("create: %w", err)
	}
	fmt.Fprintf(o.Progress, "merge: writing %d files\n", o.Files)
	l := newLayout(o.Files, int64(o.WorkspaceMB)<<20)
	write, sync, err := writeWorkspace(ctx, h.workspaceOf(sb.SandboxID), l, template.UserUID, template.UserGID)
	if err != nil {
		return rep, err
	}
	rep.Workspace = WorkspaceReport{Files: l.files, Dirs: l.dirs, Bytes: l.total, WriteMs: ms(write), SyncMs: ms(sync)}
	m := mergeSuite{h: h, o: o, l: l, parent: sb.SandboxID}
	if err := m.merges(ctx, &rep); err != nil {
		return rep, err
	}
	if err := m.summaries(ctx, &rep); err != nil {
		return rep, err
	}
	if rep.NaiveCopy.P50 > 0 {
		rep.MergeRatio = round2(rep.Merge.P50 / rep.NaiveCopy.P50)
	}
	return rep, nil
}

func cmp0(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// workspaceOf is the workspace directory of sandbox id's live tree.
func (h *harness) workspaceOf(id string) string {
	return filepath.Join(h.d.Storage.Path(storage.Key{Kind: storage.KindSandbox, Name: id}), template.Workspace)
}

type mergeSuite struct {
	h      *harness
	o      MergeOptions
	l      layout
	parent string
	next   int // the next workspace file to change
}

// change rewrites the next o.Changed files of sandbox id's workspace from
// the host (as its agent would from inside) and returns their paths.
func (m *mergeSuite) change(id string) ([]string, error) {
	root := m.h.workspaceOf(id)
	var paths []string
	for k := 0; k < m.o.Changed; k++ {
		f := m.l.file(m.next % m.l.files)
		m.next++
		p := filepath.Join(root, f)
		if err := os.WriteFile(p, []byte(fmt.Sprintf("changed by %s, %d\n", id, m.next)), 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, filepath.Join("/", template.Workspace, f))
	}
	return paths, nil
}

// merges times rounds of two forks merged into the parent in turn.
func (m *mergeSuite) merges(ctx context.Context, rep *MergeReport) error {
	var merge, dry, naive []time.Duration
	for r := 0; r <= m.o.Rounds; r++ {
		fmt.Fprintf(m.o.Progress, "merge: round %d of %d\n", r, m.o.Rounds)
		_, forks, err := forkTimed(ctx, m.h.c, m.parent, 2)
		if err != nil {
			return err
		}
		for _, f := range forks {
			paths, err := m.change(f)
			if err != nil {
				return err
			}
			d, err := timed(func() error {
				_, err := m.h.c.Snapshots.Merge(ctx, m.parent, client.MergeRequest{From: f, DryRun: true})
				return err
			})
			if err != nil {
				return err
			}
			t, err := timed(func() error {
				_, err := m.h.c.Snapshots.Merge(ctx, m.parent, client.MergeRequest{From: f})
				return err
			})
			if err != nil {
				return err
			}
			n, err := timed(func() error { return naiveCopy(ctx, m.h.c, f, m.parent, paths) })
			if err != nil {
				return err
			}
			if r > 0 { // the first round warms caches
				merge, dry, naive = append(merge, t), append(dry, d), append(naive, n)
			}
			_ = m.h.c.Sandboxes.Delete(context.WithoutCancel(ctx), f)
		}
	}
	rep.Merge, rep.MergeDryRun, rep.NaiveCopy = Summarise(merge), Summarise(dry), Summarise(naive)
	return nil
}

// naiveCopy copies paths from sandbox from to sandbox to through the
// files API, one read and one write each.
func naiveCopy(ctx context.Context, c *client.Client, from, to string, paths []string) error {
	for _, p := range paths {
		rc, err := c.Files.Read(ctx, from, p)
		if err != nil {
			return err
		}
		_, err = c.Files.Write(ctx, to, p, rc, 0o644, "")
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// summaries times the fork summary of o.Forks changed forks.
func (m *mergeSuite) summaries(ctx context.Context, rep *MergeReport) error {
	fmt.Fprintf(m.o.Progress, "merge: %d forks for the summary\n", m.o.Forks)
	_, forks, err := forkTimed(ctx, m.h.c, m.parent, m.o.Forks)
	if err != nil {
		return err
	}
	for _, f := range forks {
		if _, err := m.change(f); err != nil {
			return err
		}
	}
	var took []time.Duration
	for r := 0; r <= m.o.Rounds; r++ {
		t, err := timed(func() error {
			_, err := m.h.c.Snapshots.ForksSummary(ctx, m.parent, 0)
			return err
		})
		if err != nil {
			return err
		}
		if r == 0 {
			rep.SummaryFirstMs = ms(t)
			continue
		}
		took = append(took, t)
	}
	rep.Summary = Summarise(took)
	return nil
}

func timed(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return time.Since(start), err
}
