package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/template"
)

// SnapshotOptions tune the snapshot suite. The embedded Options give the
// data directory, storage, agent, template and logger (Creates and Execs are
// not used).
type SnapshotOptions struct {
	Options
	// Files and WorkspaceMB shape the workspace written into the sandbox.
	Files       int
	WorkspaceMB int
	// Turns is how many turns (write 25 files, take a turn snapshot) run.
	Turns int
	// Concurrent is how many forks take a turn snapshot at once.
	Concurrent int
	// ArchiveAfter and AnchorEvery override the daemon's archiving
	// settings when positive.
	ArchiveAfter, AnchorEvery int
	// Progress, when set, receives a line as each phase starts.
	Progress io.Writer
}

// Per-turn writes: turnFiles files of turnFileBytes (≈1 MB a turn).
const (
	turnFiles     = 25
	turnFileBytes = 40960
)

// SnapshotReport is what the snapshot suite prints.
type SnapshotReport struct {
	Machine  string `json:"machine"`
	Storage  string `json:"storage"`
	Runtime  string `json:"runtime"`
	Template string `json:"template"`

	Workspace WorkspaceReport `json:"workspace"`

	// Turns: each turn writes 25 files (1 MB) through one exec, then POST
	// /sandboxes/{id}/turns is timed. A turn's files are in two
	// neighbouring directories, as an agent's edits to one module are
	// (turnPaths).
	Turns     int   `json:"turns"`
	TurnAll   Stats `json:"turn"`
	TurnFirst Stats `json:"turn_first"` // turns 1…k (k = min(100, turns/2))
	TurnLast  Stats `json:"turn_last"`  // the last k turns
	// TurnFlatness is turn_last p50 / turn_first p50: how much a turn slows
	// down as snapshots pile up.
	TurnFlatness float64 `json:"turn_flatness_p50_ratio"`
	// SnapshotVolumesAfterTurns counts the snapshot volumes in the pool
	// when the turns end: the newest kept turns, the anchors, and any the
	// archiver has not caught up with (each makes a snapshot slower).
	SnapshotVolumesAfterTurns int `json:"snapshot_volumes_after_turns"`
	// TurnFrozen is how long the sandbox was frozen for each turn (the
	// answer's frozenMs).
	TurnFrozen Stats `json:"turn_frozen"`
	// TurnScattered is a few more turns after the last, each spreading its
	// 25 files over 25 directories across the tree: the worst case, beside
	// TurnLast (TurnScatteredOverLocal is the ratio of their p50s).
	TurnScattered          Stats   `json:"turn_scattered"`
	TurnScatteredOverLocal float64 `json:"turn_scattered_vs_turn_last_p50_ratio"`
	// TurnWriteExec is the exec that wrote each turn's files (context).
	TurnWriteExec Stats `json:"turn_write_exec"`
	// TurnWithExec is each turn's exec plus its snapshot, back to back:
	// what the agent waits for. Work moved from the snapshot into the exec
	// (a write-back begun while the command runs, say) lowers turn but
	// not this.
	TurnWithExec Stats `json:"turn_with_exec"`
	// TurnThinking is a few more module-local turns the way an agent
	// takes them: thinkTime passes between the turn's answer and the next
	// exec, and between the exec's answer and the turn (the model reading
	// the output), where the loop above goes on at once.
	TurnThinking Stats `json:"turn_with_think_time"`
	// TurnRaw is the floor: every tenth turn, the bench itself writes a
	// turn's files into the sandbox's volume from the host and times
	// syncfs plus the btrfs snapshot ioctl — what the filesystem alone
	// costs for the same tree at the same point of its history (the raw
	// snapshot is deleted at once). TurnOverRaw is turn p50 / raw p50.
	TurnRaw     Stats   `json:"turn_baseline_raw_btrfs"`
	TurnOverRaw float64 `json:"turn_vs_raw_btrfs_p50_ratio"`
	// TurnRawFlatness is the raw floor's own growth: the p50 of its last
	// samples over its first (as many as turn_first and turn_last cover).
	TurnRawFlatness float64 `json:"turn_baseline_raw_btrfs_flatness_p50_ratio"`

	// Diff: GET /snapshots/{turn k-1}/diff?to={turn k} for turns still in
	// the pool, as the client sees it, and the server's own tookMs.
	Diff       Stats `json:"diff_one_turn"`
	DiffServer Stats `json:"diff_one_turn_server"`
	// DiffChanges is how many paths one such diff lists (25 files plus
	// the directories whose entries changed).
	DiffChanges int `json:"diff_changes"`
	// DiffWalk is the baseline: a full comparison of the two snapshot
	// trees (treediff.Walk, SameInodes).
	DiffWalk        Stats   `json:"diff_baseline_full_walk"`
	DiffWalkChanges int     `json:"diff_baseline_full_walk_changes"`
	SpeedupDiff     float64 `json:"speedup_diff_vs_full_walk_p50"`

	// Fork: POST /sandboxes/{id}/fork of one of the recent turn snapshots
	// in the pool (count 1), until the answer (the fork is running).
	Fork       Stats `json:"fork"`
	ForkDelete Stats `json:"fork_delete"`
	// ForkCopy is the baseline: `cp -a` of the sandbox's tree into the
	// same pool, then syncfs (GNU cp reflinks file data on btrfs).
	ForkCopy    Stats   `json:"fork_baseline_cp_a"`
	SpeedupFork float64 `json:"speedup_fork_vs_cp_a_p50"`

	// Rollback: POST /sandboxes/{id}/rollback to one of the recent turns
	// still in the pool; then an exec of `true` proves the sandbox usable
	// (timed apart). RollbackArchived goes to archived turns half-way and
	// a quarter of the way through the history: the restore of the turn
	// from its chain of send streams is part of it.
	Rollback          Stats `json:"rollback"`
	ExecAfterRollback Stats `json:"exec_true_after_rollback"`
	RollbackArchived  Stats `json:"rollback_archived"`
	// RollbackInHistory: Turns more turns with a rollback to the turn
	// before the last after every third (rollback_history.go).
	RollbackInHistory Stats `json:"rollback_in_history"`
	// RollbackInHistoryInPlace is the same again with the old roots
	// deleted in place: the baseline.
	RollbackInHistoryInPlace Stats `json:"rollback_in_history_baseline_delete_in_place"`

	// Concurrent: Concurrent forks of one turn (one call, timed), each
	// writes one file, then each takes a turn, all at once.
	Concurrent       int     `json:"concurrent"`
	ConcurrentForkMs float64 `json:"concurrent_fork_call_ms"`
	ConcurrentTurn   Stats   `json:"concurrent_turn"`
	// ConcurrentFrozen is how long each of those sandboxes was frozen.
	ConcurrentFrozen Stats `json:"concurrent_turn_frozen"`

	// PhaseSeconds is the wall time of each phase.
	PhaseSeconds map[string]float64 `json:"phase_seconds"`
	TotalSeconds float64            `json:"total_seconds"`

	Targets SnapshotTargets `json:"targets"`
	// Checks sets each number held to a target beside it.
	Checks []Check `json:"checks"`
}

// WorkspaceReport describes the workspace written from the host.
type WorkspaceReport struct {
	Files   int     `json:"files"`
	Dirs    int     `json:"dirs"`
	Bytes   int64   `json:"bytes"`
	WriteMs float64 `json:"write_ms"`
	SyncMs  float64 `json:"sync_ms"`
}

// SnapshotTargets restates the goals of the snapshot suite.
type SnapshotTargets struct {
	TurnP50Ms           float64 `json:"turn_p50_ms"`
	TurnFlatness        float64 `json:"turn_flatness_p50_ratio"`
	FrozenP50Ms         float64 `json:"turn_frozen_p50_ms"`
	DiffP50Ms           float64 `json:"diff_one_turn_p50_ms"`
	ForkP50Ms           float64 `json:"fork_p50_ms"`
	RollbackP50Ms       float64 `json:"rollback_p50_ms"`
	RestoreArchivedMs   float64 `json:"rollback_archived_p50_ms"`
	ConcurrentTurnP99Ms float64 `json:"concurrent_turn_p99_ms"`
	HistoryRollbackP50  float64 `json:"rollback_in_history_p50_ms"`
	HistoryRollbackP99  float64 `json:"rollback_in_history_p99_ms"`
}

// Check is one measured number next to its target (met when value ≤ target).
type Check struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Target float64 `json:"target"`
	Met    bool    `json:"met"`
}

var snapshotTargets = SnapshotTargets{
	TurnP50Ms: 15, TurnFlatness: 1.5, FrozenP50Ms: 5, DiffP50Ms: 20,
	ForkP50Ms: 40, RollbackP50Ms: 50, RestoreArchivedMs: 1000, ConcurrentTurnP99Ms: 250,
	HistoryRollbackP50: 40, HistoryRollbackP99: 100,
}

// snapSuite is one run of the snapshot suite.
type snapSuite struct {
	h     *harness
	opts  SnapshotOptions
	l     layout
	id    string            // the sandbox holding the workspace
	turns []client.Snapshot // its turn snapshots, in order
	rep   SnapshotReport
}

// RunSnapshots measures turn snapshots, diffs, forks, rollbacks and
// concurrent snapshots on a large workspace and returns the report.
func RunSnapshots(ctx context.Context, opts SnapshotOptions) (_ SnapshotReport, retErr error) {
	if err := opts.defaults(); err != nil {
		return SnapshotReport{}, err
	}
	total := int64(opts.WorkspaceMB) << 20
	began := time.Now()
	h, err := startHarness(ctx, opts.Options, func(cfg *config.Config) {
		// A sparse image: room for the workspace, its copies in the cp
		// baseline, and every turn.
		cfg.ImageSize = max(16<<30, 4*total)
		cfg.MaxSandboxes = opts.Concurrent + 4
		cfg.MaxTurns = 0 // keep every turn: nothing is pruned under the measurement
		if opts.ArchiveAfter > 0 {
			cfg.ArchiveAfter = opts.ArchiveAfter
		}
		if opts.AnchorEvery > 0 {
			cfg.AnchorEvery = opts.AnchorEvery
		}
		cfg.DefaultDiskBytes = 0
	})
	if err != nil {
		return SnapshotReport{}, err
	}
	defer func() { retErr = errors.Join(retErr, h.close()) }()

	s := &snapSuite{h: h, opts: opts, l: newLayout(opts.Files, total)}
	s.rep = SnapshotReport{
		Machine: machine(), Storage: h.d.Storage.Name(), Runtime: h.d.Runtime.Name(), Template: h.tmpl,
		Turns: opts.Turns, Concurrent: opts.Concurrent, Targets: snapshotTargets,
		PhaseSeconds: map[string]float64{},
	}
	for _, p := range []struct {
		name string
		run  func(context.Context) error
	}{
		{"workspace", s.workspace},
		{"turns", s.runTurns},
		// The diff before the turns below: its pairs are the newest turns,
		// in the pool however few turns it keeps.
		{"diff", s.runDiff},
		{"thinking_turns", s.runThinkingTurns},
		{"scattered_turns", s.runScatteredTurns},
		{"fork", s.runFork},
		{"rollback", s.runRollback},
		{"concurrent", s.runConcurrent},
		{"rollback_in_history", s.runRollbackInHistory},
		// Last: deleting 100k-file copies keeps btrfs's cleaner busy, which
		// would disturb whatever came after.
		{"fork_baseline_cp", s.runCopyBaseline},
	} {
		fmt.Fprintf(opts.Progress, "snapshot bench: %s (%.0fs in)\n", p.name, time.Since(began).Seconds())
		start := time.Now()
		if err := p.run(ctx); err != nil {
			return s.rep, fmt.Errorf("%s: %w", p.name, err)
		}
		s.rep.PhaseSeconds[p.name] = round2(time.Since(start).Seconds())
	}
	if err := h.c.Sandboxes.Delete(ctx, s.id); err != nil {
		return s.rep, fmt.Errorf("delete workspace sandbox: %w", err)
	}
	s.rep.TotalSeconds = round2(time.Since(began).Seconds())
	s.rep.Checks = s.rep.checks()
	return s.rep, nil
}

// defaults fills in the snapshot suite's sizes left at zero and refuses
// sizes it cannot run.
func (opts *SnapshotOptions) defaults() error {
	defaultSize(&opts.Files, 100_000)
	defaultSize(&opts.WorkspaceMB, 1024)
	defaultSize(&opts.Turns, 300)
	if opts.Turns < 2 {
		return fmt.Errorf("--turns %d: want at least 2 (diffs compare consecutive turns)", opts.Turns)
	}
	defaultSize(&opts.Concurrent, 32)
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if total := int64(opts.WorkspaceMB) << 20; total < int64(opts.Files) {
		return fmt.Errorf("--workspace-mb %d is too small for %d files", opts.WorkspaceMB, opts.Files)
	}
	return nil
}

// workspace creates the sandbox and writes the workspace into its live
// volume from the host.
func (s *snapSuite) workspace(ctx context.Context) error {
	never := int64(0)
	sb, err := s.h.c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: s.h.tmpl, Timeout: &never})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	s.id = sb.SandboxID
	vol := s.h.d.Storage.Path(storage.Key{Kind: storage.KindSandbox, Name: s.id})
	root := filepath.Join(vol, template.Workspace)
	write, sync, err := writeWorkspace(ctx, root, s.l, template.UserUID, template.UserGID)
	if err != nil {
		return err
	}
	s.rep.Workspace = WorkspaceReport{
		Files: s.l.files, Dirs: s.l.dirs, Bytes: s.l.total,
		WriteMs: ms(write), SyncMs: ms(sync),
	}
	return nil
}

// runTurns runs the turns and times each turn snapshot.
func (s *snapSuite) runTurns(ctx context.Context) error {
	c := s.h.c
	var turn, frozen, execs, both, raw []time.Duration
	// The raw floor every tenth turn; every turn in a short run, so that it
	// has samples at all.
	rawEvery := max(1, min(10, s.opts.Turns/10))
	for t := 1; t <= s.opts.Turns; t++ {
		start := time.Now()
		res, err := c.Commands.ExecWait(ctx, s.id, client.ExecRequest{Command: turnCommand(s.l, t, false)})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exited %d: %s", res.ExitCode, res.Stderr)
		}
		if err != nil {
			return fmt.Errorf("turn %d: write files: %w", t, err)
		}
		execs = append(execs, time.Since(start))

		start = time.Now()
		snap, err := c.Snapshots.Turn(ctx, s.id)
		if err != nil {
			return fmt.Errorf("turn %d: %w", t, err)
		}
		turn = append(turn, time.Since(start))
		both = append(both, execs[len(execs)-1]+turn[len(turn)-1])
		frozen = append(frozen, time.Duration(snap.FrozenMs*float64(time.Millisecond)))
		s.turns = append(s.turns, snap)
		if t%rawEvery == 0 {
			d, err := s.rawTurn(ctx, t)
			if err != nil {
				return fmt.Errorf("turn %d: raw baseline: %w", t, err)
			}
			raw = append(raw, d)
		}
	}
	if vols, err := s.h.d.Storage.List(ctx, storage.KindSnapshot); err == nil {
		s.rep.SnapshotVolumesAfterTurns = len(vols)
	}
	k := min(100, len(turn)/2)
	s.rep.TurnAll = Summarise(turn)
	s.rep.TurnFirst = Summarise(turn[:k])
	s.rep.TurnLast = Summarise(turn[len(turn)-k:])
	if s.rep.TurnFirst.P50 > 0 {
		s.rep.TurnFlatness = round2(s.rep.TurnLast.P50 / s.rep.TurnFirst.P50)
	}
	s.rep.TurnFrozen = Summarise(frozen)
	s.rep.TurnWriteExec = Summarise(execs)
	s.rep.TurnWithExec = Summarise(both)
	s.rep.TurnRaw = Summarise(raw)
	s.rep.TurnOverRaw = ratio(s.rep.TurnAll, s.rep.TurnRaw)
	if kr := k / 10; kr > 0 && len(raw) >= 2*kr {
		s.rep.TurnRawFlatness = ratio(Summarise(raw[len(raw)-kr:]), Summarise(raw[:kr]))
	}
	return nil
}

// thinkTime is the pause on each side of a thinking turn's exec; a model's
// turn takes seconds, so this is short of the real gap.
const thinkTime = 100 * time.Millisecond

// thinkingTurns is how many turns runThinkingTurns takes: few, since they
// push as many turns out of the pool.
func thinkingTurns(turns int) int { return min(10, max(2, turns/20)) }

// runThinkingTurns times module-local turns with think time around their
// execs (TurnThinking). They follow the timed turns and are not among
// s.turns.
func (s *snapSuite) runThinkingTurns(ctx context.Context) error {
	var took []time.Duration
	for i := 1; i <= thinkingTurns(s.opts.Turns); i++ {
		t := s.opts.Turns + scatteredTurns(s.opts.Turns) + i
		time.Sleep(thinkTime)
		res, err := s.h.c.Commands.ExecWait(ctx, s.id, client.ExecRequest{Command: turnCommand(s.l, t, false)})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exited %d: %s", res.ExitCode, res.Stderr)
		}
		if err != nil {
			return fmt.Errorf("thinking turn %d: write files: %w", t, err)
		}
		time.Sleep(thinkTime)
		start := time.Now()
		if _, err := s.h.c.Snapshots.Turn(ctx, s.id); err != nil {
			return fmt.Errorf("thinking turn %d: %w", t, err)
		}
		took = append(took, time.Since(start))
	}
	s.rep.TurnThinking = Summarise(took)
	return nil
}

// scatteredTurns is how many scattered turns follow turns local ones: few,
// since they push as many local turns out of the pool.
func scatteredTurns(turns int) int { return min(10, max(2, turns/10)) }

// runScatteredTurns times a few more turns at the end of the history, each
// spreading its files over the whole tree (the worst case; see turnPaths).
// They are not among s.turns: the later phases use local turns only.
func (s *snapSuite) runScatteredTurns(ctx context.Context) error {
	n := scatteredTurns(s.opts.Turns)
	var took []time.Duration
	for i := 1; i <= n; i++ {
		t := s.opts.Turns + i
		res, err := s.h.c.Commands.ExecWait(ctx, s.id, client.ExecRequest{Command: turnCommand(s.l, t, true)})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exited %d: %s", res.ExitCode, res.Stderr)
		}
		if err != nil {
			return fmt.Errorf("scattered turn %d: write files: %w", t, err)
		}
		start := time.Now()
		if _, err := s.h.c.Snapshots.Turn(ctx, s.id); err != nil {
			return fmt.Errorf("scattered turn %d: %w", t, err)
		}
		took = append(took, time.Since(start))
	}
	s.rep.TurnScattered = Summarise(took)
	s.rep.TurnScatteredOverLocal = ratio(s.rep.TurnScattered, s.rep.TurnLast)
	return nil
}

// rawTurn writes a turn's worth of files into the sandbox's volume from the
// host (half new files, half overwrites, in two neighbouring directories,
// like a turn), then times syncfs and a read-only btrfs snapshot of the
// volume, as a turn does without warren around it; the snapshot is deleted
// after.
func (s *snapSuite) rawTurn(ctx context.Context, t int) (time.Duration, error) {
	live := storage.Key{Kind: storage.KindSandbox, Name: s.id}
	vol := s.h.d.Storage.Path(live)
	buf := make([]byte, turnFileBytes)
	for _, rel := range rawTurnPaths(s.l, t) {
		if _, err := rand.Read(buf); err != nil {
			return 0, err
		}
		if err := os.WriteFile(filepath.Join(vol, template.Workspace, rel), buf, 0o644); err != nil {
			return 0, err
		}
	}
	key := storage.Key{Kind: storage.KindScratch, Name: fmt.Sprintf("bench-raw-%d", t)}
	start := time.Now()
	f, err := os.Open(vol)
	if err != nil {
		return 0, err
	}
	err = unix.Syncfs(int(f.Fd()))
	f.Close()
	if err != nil {
		return 0, fmt.Errorf("syncfs: %w", err)
	}
	if _, err := s.h.d.Storage.Snapshot(ctx, live, key, storage.SnapshotOptions{ReadOnly: true}); err != nil {
		return 0, err
	}
	took := time.Since(start)
	return took, s.h.d.Storage.Delete(ctx, key)
}

// turnPaths are the workspace-relative paths turn t writes: turnFiles
// files, alternately a new file and an overwrite of an existing one.
//
// A local turn works the way an agent's turn does, inside one module: its
// files are in two neighbouring directories, a different pair each turn.
// A scattered turn spreads its files over turnFiles directories across the
// whole tree. The difference matters to btrfs: the first write to a tree
// shared with a snapshot copies the path from the root to the leaf and
// bumps the references of every child of each copied node, so a scattered
// turn makes the next snapshot commit several times as much metadata.
func turnPaths(l layout, t int, scattered bool) []string {
	if !scattered {
		return localPaths(l, t, 0, "turn")
	}
	paths := make([]string, turnFiles)
	for j := range paths {
		n := (t-1)*turnFiles + j
		if j%2 == 0 {
			paths[j] = fmt.Sprintf("%s/turn%d-%02d", l.dir(n*7), t, j)
		} else {
			paths[j] = l.file(n * 7919 % l.files)
		}
	}
	return paths
}

// rawTurnPaths are the paths raw turn t writes: local turn t's pattern
// half-way round the directories, where the turns last wrote hundreds of
// turns ago (turn t's pair comes back every 1,000 turns; this one is 500
// turns from it), so that the raw turn is a first writer there as a real
// turn is, with its new files named apart from any turn's. Rewriting the
// paths turn t has just written flatters the floor: on the same tree,
// 16.3 ms p50 that way against 21.1 ms when the raw turn wrote them just
// before the turn did (300 turns).
func rawTurnPaths(l layout, t int) []string { return localPaths(l, t, l.dirs/2, "raw") }

// localPaths are a module-local turn's paths: new files named
// <prefix><t>-<j> and overwrites, in the pair of directories turn t uses,
// moved shift directories on.
func localPaths(l layout, t, shift int, prefix string) []string {
	paths := make([]string, turnFiles)
	perDir := max(1, l.files/l.dirs)
	for j := range paths {
		d := (t*37 + j%4/2 + shift) % l.dirs
		if j%2 == 0 {
			paths[j] = fmt.Sprintf("%s/%s%d-%02d", l.dir(d), prefix, t, j)
			continue
		}
		i := d + l.dirs*((t*13+j)%perDir)
		if i >= l.files {
			i = d
		}
		paths[j] = l.file(i)
	}
	return paths
}

// turnCommand is turn t's shell command: turnFileBytes of random bytes to
// each of its paths.
func turnCommand(l layout, t int, scattered bool) string {
	cmd := "set -e"
	for _, p := range turnPaths(l, t, scattered) {
		cmd += fmt.Sprintf("; head -c %d /dev/urandom > %s/%s", turnFileBytes, template.Workspace, p)
	}
	return cmd
}

// runDiff times one-turn diffs, and the full tree walk as the baseline.
func (s *snapSuite) runDiff(ctx context.Context) error {
	c := s.h.c
	n := len(s.turns)
	// Consecutive turns still in the pool: an archived pair would time
	// its restore (rollback_archived measures that). No turn has been
	// taken since the last of s.turns.
	lo := max(1, n-s.inPool(0))
	pairs := min(30, n-lo)
	diff := func(k int) (client.Diff, error) {
		return c.Snapshots.Diff(ctx, s.turns[k-1].SnapshotID, s.turns[k].SnapshotID, false)
	}
	if _, err := diff(n - 1); err != nil { // warm-up
		return err
	}
	var took, server []time.Duration
	for i := 0; i < pairs; i++ {
		k := lo + i*(n-lo)/pairs
		start := time.Now()
		d, err := diff(k)
		if err != nil {
			return fmt.Errorf("turn %d → %d: %w", k, k+1, err)
		}
		took = append(took, time.Since(start))
		server = append(server, time.Duration(d.TookMs*float64(time.Millisecond)))
		s.rep.DiffChanges = len(d.Changes)
	}
	s.rep.Diff = Summarise(took)
	s.rep.DiffServer = Summarise(server)

	// The baseline compares the last pair measured, tree against tree.
	k := lo + (pairs-1)*(n-lo)/pairs
	from := s.h.d.Storage.Path(storage.Key{Kind: storage.KindSnapshot, Name: s.turns[k-1].SnapshotID})
	to := s.h.d.Storage.Path(storage.Key{Kind: storage.KindSnapshot, Name: s.turns[k].SnapshotID})
	var walk []time.Duration
	for i := 0; i < 3; i++ {
		start := time.Now()
		changes, err := walkTrees(ctx, from, to)
		if err != nil {
			return fmt.Errorf("full walk: %w", err)
		}
		walk = append(walk, time.Since(start))
		s.rep.DiffWalkChanges = len(changes)
	}
	s.rep.DiffWalk = Summarise(walk)
	s.rep.SpeedupDiff = ratio(s.rep.DiffWalk, s.rep.Diff)
	return nil
}

// runFork times forks of turn snapshots, deleting each fork after.
func (s *snapSuite) runFork(ctx context.Context) error {
	c := s.h.c
	n := len(s.turns)
	const forks = 15
	// Turns still in the pool: a fork of an archived turn restores it
	// first, which rollback_archived measures.
	w := min(n, s.inPool(s.laterTurns()))
	never := int64(0)
	var took, deleted []time.Duration
	for i := -1; i < forks; i++ { // i = -1 is an untimed warm-up
		snap := s.turns[(n-1)-max(i, 0)%w]
		start := time.Now()
		res, err := c.Snapshots.Fork(ctx, s.id, client.ForkRequest{SnapshotID: snap.SnapshotID, Count: 1, Timeout: &never})
		if err != nil {
			return err
		}
		elapsed := time.Since(start)
		if len(res) != 1 || res[0].Sandbox == nil {
			return fmt.Errorf("fork of %s failed: %v", snap.Name, forkError(res))
		}
		start = time.Now()
		if err := c.Sandboxes.Delete(ctx, res[0].Sandbox.SandboxID); err != nil {
			return fmt.Errorf("delete fork: %w", err)
		}
		if i >= 0 {
			took = append(took, elapsed)
			deleted = append(deleted, time.Since(start))
		}
	}
	s.rep.Fork = Summarise(took)
	s.rep.ForkDelete = Summarise(deleted)
	return nil
}

func forkError(res []client.ForkResult) error {
	for _, r := range res {
		if r.Error != nil {
			return r.Error
		}
	}
	return fmt.Errorf("%d results", len(res))
}

// runConcurrent forks Concurrent sandboxes at once, has each write a file,
// then times a turn in each, all issued at once.
func (s *snapSuite) runConcurrent(ctx context.Context) error {
	c := s.h.c
	never := int64(0)
	snap := s.turns[len(s.turns)-1]
	start := time.Now()
	res, err := c.Snapshots.Fork(ctx, s.id, client.ForkRequest{SnapshotID: snap.SnapshotID, Count: s.opts.Concurrent, Timeout: &never})
	if err != nil {
		return fmt.Errorf("fork %d: %w", s.opts.Concurrent, err)
	}
	s.rep.ConcurrentForkMs = ms(time.Since(start))
	var forks []string
	var errs []error
	for _, r := range res {
		if r.Sandbox != nil {
			forks = append(forks, r.Sandbox.SandboxID)
		} else if r.Error != nil {
			errs = append(errs, r.Error)
		}
	}
	defer func() {
		for _, id := range forks {
			if err := c.Sandboxes.Delete(context.WithoutCancel(ctx), id); err != nil {
				s.h.log.Warn("delete fork", "sandbox", id, "err", err)
			}
		}
	}()
	if len(errs) > 0 || len(forks) != s.opts.Concurrent {
		return fmt.Errorf("%d of %d forks started: %w", len(forks), s.opts.Concurrent, errors.Join(errs...))
	}
	err = parallel(forks, nil, func(i int, id string) error {
		cmd := fmt.Sprintf("head -c %d /dev/urandom > %s/concurrent-%d", turnFileBytes, template.Workspace, i)
		res, err := c.Commands.ExecWait(ctx, id, client.ExecRequest{Command: cmd})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exited %d: %s", res.ExitCode, res.Stderr)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("write a file in each fork: %w", err)
	}
	took := make([]time.Duration, len(forks))
	frozen := make([]time.Duration, len(forks))
	err = parallel(forks, took, func(i int, id string) error {
		snap, err := c.Snapshots.Turn(ctx, id)
		frozen[i] = time.Duration(snap.FrozenMs * float64(time.Millisecond))
		return err
	})
	if err != nil {
		return fmt.Errorf("concurrent turns: %w", err)
	}
	s.rep.ConcurrentTurn = Summarise(took)
	s.rep.ConcurrentFrozen = Summarise(frozen)
	return nil
}

// runCopyBaseline times `cp -a` of the sandbox's tree into a scratch volume
// of the same pool, plus the syncfs that makes it durable (a snapshot is
// durable when it returns).
func (s *snapSuite) runCopyBaseline(ctx context.Context) error {
	src := s.h.d.Storage.Path(storage.Key{Kind: storage.KindSandbox, Name: s.id})
	var took []time.Duration
	for i := 0; i < 2; i++ {
		d, err := copyTree(ctx, s.h.d.Storage, src, fmt.Sprintf("bench-cp-%d", i))
		if err != nil {
			return err
		}
		took = append(took, d)
	}
	s.rep.ForkCopy = Summarise(took)
	s.rep.SpeedupFork = ratio(s.rep.ForkCopy, s.rep.Fork)
	return nil
}

func (r SnapshotReport) checks() []Check {
	t := r.Targets
	out := []Check{
		{Name: "turn_p50_ms", Value: r.TurnAll.P50, Target: t.TurnP50Ms},
		{Name: "turn_flatness_p50_ratio", Value: r.TurnFlatness, Target: t.TurnFlatness},
		{Name: "turn_frozen_p50_ms", Value: r.TurnFrozen.P50, Target: t.FrozenP50Ms},
		{Name: "diff_one_turn_p50_ms", Value: r.Diff.P50, Target: t.DiffP50Ms},
		{Name: "fork_p50_ms", Value: r.Fork.P50, Target: t.ForkP50Ms},
		{Name: "rollback_p50_ms", Value: r.Rollback.P50, Target: t.RollbackP50Ms},
		{Name: "rollback_archived_p50_ms", Value: r.RollbackArchived.P50, Target: t.RestoreArchivedMs},
		{Name: "concurrent_turn_p99_ms", Value: r.ConcurrentTurn.P99, Target: t.ConcurrentTurnP99Ms},
		{Name: "rollback_in_history_p50_ms", Value: r.RollbackInHistory.P50, Target: t.HistoryRollbackP50},
		{Name: "rollback_in_history_p99_ms", Value: r.RollbackInHistory.P99, Target: t.HistoryRollbackP99},
	}
	if r.RollbackArchived.N == 0 { // a run too short to archive anything
		out = slices.DeleteFunc(out, func(c Check) bool { return c.Name == "rollback_archived_p50_ms" })
	}
	for i := range out {
		out[i].Met = out[i].Value <= out[i].Target
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
