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
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/template"
)

// TransferOptions tune the transfer suite: a sandbox's snapshot moved from
// one daemon to another (GET /snapshots/{id}/export piped into POST
// /snapshots/import), both on this host, over loopback HTTP. The embedded
// Options give the data directory (both daemons live under it), storage,
// agent, template and logger.
type TransferOptions struct {
	Options
	// Files and WorkspaceMB shape the workspace written into the sandbox.
	Files       int
	WorkspaceMB int
	// Rounds is how many times the whole snapshot is moved (and the disk,
	// btrfs send and the export alone are measured); Turns how many
	// one-turn deltas follow.
	Rounds, Turns int
	// MemoryMB is what the gvisor sandbox of the memory move holds (0:
	// the item is skipped, as it is without gvisor).
	MemoryMB int
	Progress io.Writer
}

// TransferReport is what the transfer suite prints. Rates are MB/s (10^6
// bytes) of the workspace's size; every timed read of the snapshot starts
// with its files' pages dropped from the page cache (theirs only).
type TransferReport struct {
	Machine   string          `json:"machine"`
	Storage   string          `json:"storage"`
	Template  string          `json:"template"`
	Workspace WorkspaceReport `json:"workspace"`
	// BundleBytes is the size of the whole snapshot's bundle.
	BundleBytes int64 `json:"whole_bundle_bytes"`

	// DiskRead is an O_DIRECT read, 4 MiB at a time, of one file as large
	// as the workspace in the same pool: the disk's sequential read rate.
	// DiskWrite is that file's writing (buffered, then fdatasync).
	DiskRead  Throughput `json:"disk_sequential_read"`
	DiskWrite Throughput `json:"disk_sequential_write"`
	// BtrfsSend is `btrfs send` (btrfs-progs) of the snapshot into
	// /dev/null, when installed: the naive baseline.
	BtrfsSend *Throughput `json:"baseline_btrfs_send_devnull,omitempty"`
	// CopyTree is `cp -a` of the snapshot's files into a new volume in the
	// other daemon's pool, written back (syncfs): on one host, where both
	// ends share the disk and the cores, the floor of any transfer (every
	// byte read and written, every file made), without its stream.
	CopyTree Throughput `json:"baseline_copy_tree"`
	// Export is GET /snapshots/{id}/export alone, the body discarded.
	Export Throughput `json:"export_http_discard"`
	// Whole is the export piped into the other daemon's import, until the
	// import's answer (the snapshot is written back and recorded there).
	Whole Throughput `json:"whole_transfer"`
	// Delta is one turn (25 files, 1 MB, written by an exec) moved as a
	// delta against the turn before, which the other daemon holds.
	Delta      Stats `json:"turn_delta_transfer"`
	DeltaBytes int64 `json:"turn_delta_bundle_bytes_p50"`

	// Ratios of p50 rates.
	WholeOverDiskRead   float64  `json:"whole_vs_disk_read_p50_ratio"`
	WholeOverDiskWrite  float64  `json:"whole_vs_disk_write_p50_ratio"`
	ExportOverDiskRead  float64  `json:"export_vs_disk_read_p50_ratio"`
	WholeOverCopyTree   float64  `json:"whole_vs_copy_tree_p50_ratio"`
	WholeOverBtrfsSend  *float64 `json:"whole_vs_btrfs_send_p50_ratio,omitempty"`
	ExportOverBtrfsSend *float64 `json:"export_vs_btrfs_send_p50_ratio,omitempty"`
	// Load is the host's 1-minute load average as each phase began: the
	// numbers mean little on a busy host.
	Load         map[string]float64 `json:"load_1m"`
	PhaseSeconds map[string]float64 `json:"phase_seconds"`
	Targets      TransferTargets    `json:"targets"`
	// MemoryMove is a gvisor sandbox moved with its memory.
	MemoryMove *MemoryMoveReport `json:"memory_move,omitempty"`
}

// Throughput is a timed operation over a known number of bytes. CPU, when
// set, is the CPU time it took on this host (the bench's process, with both
// daemons in it, and its children; not the kernel's own workers): on a
// busy host the rates follow the load, this much less.
type Throughput struct {
	Time    Stats   `json:"time"`
	CPU     *Stats  `json:"cpu,omitempty"`
	MBpsP50 float64 `json:"mb_per_s_p50"`
	MBpsMin float64 `json:"mb_per_s_min"`
	MBpsMax float64 `json:"mb_per_s_max"`
}

func throughput(bytes int64, took []time.Duration) Throughput {
	st := Summarise(took)
	rate := func(msec float64) float64 {
		if msec <= 0 {
			return 0
		}
		return float64(bytes) / 1e6 / (msec / 1000)
	}
	return Throughput{Time: st, MBpsP50: rate(st.P50), MBpsMin: rate(st.Max), MBpsMax: rate(st.Min)}
}

// TransferTargets are issue 25's goals.
type TransferTargets struct {
	WholeVsDiskRead float64 `json:"whole_vs_disk_read_p50_ratio_min"`
	DeltaP50Ms      float64 `json:"turn_delta_transfer_p50_ms_max"`
}

// transferSuite is one run of the transfer suite: a sends to b.
type transferSuite struct {
	a, b *harness
	opts TransferOptions
	l    layout
	rep  TransferReport
	id   string // the sandbox on a
	snap string // the snapshot of it the last whole round moved
}

// RunTransfer measures snapshot transfers between two daemons on this host.
func RunTransfer(ctx context.Context, opts TransferOptions) (_ TransferReport, retErr error) {
	defaultSize(&opts.Files, 4096)
	defaultSize(&opts.WorkspaceMB, 1024)
	defaultSize(&opts.Rounds, 5)
	defaultSize(&opts.Turns, 30)
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	total := int64(opts.WorkspaceMB) << 20
	s := &transferSuite{opts: opts, l: newLayout(opts.Files, total)}
	if err := s.start(ctx, total); err != nil {
		return TransferReport{}, errors.Join(err, s.close())
	}
	defer func() { retErr = errors.Join(retErr, s.close()) }()
	s.rep = TransferReport{
		Machine: machine(), Storage: s.a.d.Storage.Name(), Template: s.a.tmpl,
		Load: map[string]float64{}, PhaseSeconds: map[string]float64{},
		Targets: TransferTargets{WholeVsDiskRead: 0.8, DeltaP50Ms: 100},
	}
	began := time.Now()
	for _, p := range []struct {
		name string
		run  func(context.Context) error
	}{
		{"workspace", s.workspace},
		{"whole", s.runWhole},
		{"turns", s.runTurns},
		{"memory_move", s.runMemoryMove},
	} {
		fmt.Fprintf(opts.Progress, "transfer bench: %s (%.0fs in, load %.1f)\n", p.name, time.Since(began).Seconds(), loadAverage())
		s.rep.Load[p.name] = loadAverage()
		start := time.Now()
		if err := p.run(ctx); err != nil {
			return s.rep, fmt.Errorf("%s: %w", p.name, err)
		}
		s.rep.PhaseSeconds[p.name] = time.Since(start).Seconds()
	}
	s.ratios()
	return s.rep, nil
}

// start opens both daemons: a under DataDir/a, b under DataDir/b. b starts
// no sandbox, so it has no network of its own to clash with a's.
func (s *transferSuite) start(ctx context.Context, total int64) error {
	tune := func(cfg *config.Config) {
		cfg.ImageSize = max(8<<30, 4*total)
		cfg.MaxTurns = 0
		cfg.ArchiveAfter = 1 << 20 // every turn stays in the pool: an archived one would time its restore
		cfg.DefaultDiskBytes = 0
	}
	oa, ob := s.opts.Options, s.opts.Options
	oa.DataDir, ob.DataDir = filepath.Join(s.opts.DataDir, "a"), filepath.Join(s.opts.DataDir, "b")
	var err error
	if s.a, err = startHarness(ctx, oa, tune); err != nil {
		return fmt.Errorf("daemon a: %w", err)
	}
	s.b, err = startHarness(ctx, ob, func(cfg *config.Config) {
		tune(cfg)
		cfg.Network.Enabled = false
	})
	if err != nil {
		return fmt.Errorf("daemon b: %w", err)
	}
	return nil
}

func (s *transferSuite) close() error {
	var errs []error
	for _, h := range []*harness{s.b, s.a} {
		if h != nil {
			errs = append(errs, h.close())
		}
	}
	return errors.Join(errs...)
}

// workspace writes the workspace into a sandbox on a.
func (s *transferSuite) workspace(ctx context.Context) error {
	never := int64(0)
	sb, err := s.a.c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: s.a.tmpl, Timeout: &never})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	s.id = sb.SandboxID
	vol := s.a.d.Storage.Path(storage.Key{Kind: storage.KindSandbox, Name: s.id})
	write, sync, err := writeWorkspace(ctx, filepath.Join(vol, template.Workspace), s.l, template.UserUID, template.UserGID)
	if err != nil {
		return err
	}
	s.rep.Workspace = WorkspaceReport{Files: s.l.files, Dirs: s.l.dirs, Bytes: s.l.total, WriteMs: ms(write), SyncMs: ms(sync)}
	return nil
}

// transfer pipes a's export of id (against base when set) into b's
// import, and returns the bundle's size.
func (s *transferSuite) transfer(ctx context.Context, id, base string) (int64, error) {
	body, err := s.a.c.Snapshots.Export(ctx, id, base)
	if err != nil {
		return 0, fmt.Errorf("export %s: %w", id, err)
	}
	defer body.Close()
	counted := &countReader{r: body}
	if _, err := s.b.c.Snapshots.Import(ctx, counted, false); err != nil {
		return 0, fmt.Errorf("import %s: %w", id, err)
	}
	return counted.n, nil
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func loadAverage() float64 {
	var one float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		_, _ = fmt.Sscan(string(b), &one)
	}
	return one
}

func cpuStats(took []time.Duration) *Stats {
	if len(took) == 0 {
		return nil
	}
	st := Summarise(took)
	return &st
}
