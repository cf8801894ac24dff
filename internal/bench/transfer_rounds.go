package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/storage"
)

// runWhole moves the whole workspace Rounds times, each round beside an
// O_DIRECT read of a file as large in a's pool, `btrfs send` into /dev/null
// and the export alone. Each round moves a new snapshot of the same tree
// (an id b has held and deleted stays taken there); the previous round's
// are deleted, the last stays as the base of the turns' deltas.
func (s *transferSuite) runWhole(ctx context.Context) error {
	scratch := storage.Key{Kind: storage.KindScratch, Name: "transfer-disk-rate"}
	vol, err := s.a.d.Storage.Create(ctx, scratch)
	if err != nil {
		return fmt.Errorf("scratch volume: %w", err)
	}
	defer func() { _ = s.a.d.Storage.Delete(context.WithoutCancel(ctx), scratch) }()
	big := filepath.Join(vol, "sequential")
	wrote, err := writeSequential(big, s.l.total)
	if err != nil {
		return err
	}
	s.rep.DiskWrite = throughput(s.l.total, []time.Duration{wrote})
	progs, _ := exec.LookPath("btrfs")
	var rounds wholeRounds
	for round := range s.opts.Rounds {
		fmt.Fprintf(s.opts.Progress, "transfer bench: whole round %d (load %.1f)\n", round+1, loadAverage())
		prev := s.snap
		snap, err := s.a.c.Snapshots.Create(ctx, s.id, client.NewSnapshot{Name: fmt.Sprintf("whole-%d", round)})
		if err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		s.snap = snap.SnapshotID
		if err := s.wholeRound(ctx, big, progs, &rounds); err != nil {
			return err
		}
		if prev != "" {
			if err := s.b.c.Snapshots.Delete(ctx, prev); err != nil {
				return fmt.Errorf("delete the import on b: %w", err)
			}
			if err := s.a.c.Snapshots.Delete(ctx, prev); err != nil {
				return fmt.Errorf("delete the snapshot on a: %w", err)
			}
		}
	}
	s.rep.DiskRead = throughput(s.l.total, rounds.reads)
	s.rep.Export = throughput(s.l.total, rounds.exports)
	s.rep.Export.CPU = cpuStats(rounds.exportsCPU)
	s.rep.CopyTree = throughput(s.l.total, rounds.copies)
	s.rep.CopyTree.CPU = cpuStats(rounds.copiesCPU)
	s.rep.Whole = throughput(s.l.total, rounds.wholes)
	s.rep.Whole.CPU = cpuStats(rounds.wholesCPU)
	if progs != "" {
		send := throughput(s.l.total, rounds.sends)
		send.CPU = cpuStats(rounds.sendsCPU)
		s.rep.BtrfsSend = &send
	}
	return nil
}

// wholeRounds gathers the rounds' timings.
type wholeRounds struct {
	reads, sends, copies, exports, wholes []time.Duration
	// The CPU time each took (timeCold).
	sendsCPU, copiesCPU, exportsCPU, wholesCPU []time.Duration
}

// wholeRound times, for the snapshot s.snap: the O_DIRECT read of big,
// btrfs send (when progs is set), the export alone and the transfer.
func (s *transferSuite) wholeRound(ctx context.Context, big, progs string, r *wholeRounds) error {
	snapPath := s.a.d.Storage.Path(storage.Key{Kind: storage.KindSnapshot, Name: s.snap})
	start := time.Now()
	if err := readDirect(big); err != nil {
		return err
	}
	r.reads = append(r.reads, time.Since(start))
	if progs != "" {
		took, err := timeCold(snapPath, &r.sendsCPU, func() error { return btrfsSend(ctx, progs, snapPath) })
		if err != nil {
			return err
		}
		r.sends = append(r.sends, took)
	}
	var copied time.Duration
	if _, err := timeCold(snapPath, &r.copiesCPU, func() (err error) {
		copied, err = copyTree(ctx, s.b.d.Storage, snapPath, "transfer-copy")
		return err
	}); err != nil {
		return err
	}
	r.copies = append(r.copies, copied)
	took, err := timeCold(snapPath, &r.exportsCPU, func() error { return s.exportOnly(ctx) })
	if err != nil {
		return err
	}
	r.exports = append(r.exports, took)
	took, err = timeCold(snapPath, &r.wholesCPU, func() (err error) {
		s.rep.BundleBytes, err = s.transfer(ctx, s.snap, "")
		return err
	})
	if err != nil {
		return err
	}
	r.wholes = append(r.wholes, took)
	return nil
}

// runTurns takes Turns turns on a, each writing 25 files through an exec,
// and times each one's transfer to b as a delta against the turn before.
func (s *transferSuite) runTurns(ctx context.Context) error {
	var took []time.Duration
	var sizes []int64
	base := s.snap
	for t := 1; t <= s.opts.Turns; t++ {
		res, err := s.a.c.Commands.ExecWait(ctx, s.id, client.ExecRequest{Command: turnCommand(s.l, t, false)})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exited %d: %s", res.ExitCode, res.Stderr)
		}
		if err != nil {
			return fmt.Errorf("turn %d: write files: %w", t, err)
		}
		snap, err := s.a.c.Snapshots.Turn(ctx, s.id)
		if err != nil {
			return fmt.Errorf("turn %d: %w", t, err)
		}
		start := time.Now()
		n, err := s.transfer(ctx, snap.SnapshotID, base)
		if err != nil {
			return fmt.Errorf("turn %d: %w", t, err)
		}
		took = append(took, time.Since(start))
		sizes = append(sizes, n)
		base = snap.SnapshotID
	}
	s.rep.Delta = Summarise(took)
	slices.Sort(sizes)
	if len(sizes) > 0 {
		s.rep.DeltaBytes = sizes[len(sizes)/2]
	}
	return nil
}

// exportOnly reads a's export of the whole snapshot and discards it.
func (s *transferSuite) exportOnly(ctx context.Context) error {
	body, err := s.a.c.Snapshots.Export(ctx, s.snap, "")
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer body.Close()
	if _, err := io.Copy(io.Discard, body); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}

func (s *transferSuite) ratios() {
	r := &s.rep
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	r.WholeOverDiskRead = ratio(r.Whole.MBpsP50, r.DiskRead.MBpsP50)
	r.WholeOverDiskWrite = ratio(r.Whole.MBpsP50, r.DiskWrite.MBpsP50)
	r.ExportOverDiskRead = ratio(r.Export.MBpsP50, r.DiskRead.MBpsP50)
	r.WholeOverCopyTree = ratio(r.Whole.MBpsP50, r.CopyTree.MBpsP50)
	if r.BtrfsSend != nil {
		w, e := ratio(r.Whole.MBpsP50, r.BtrfsSend.MBpsP50), ratio(r.Export.MBpsP50, r.BtrfsSend.MBpsP50)
		r.WholeOverBtrfsSend, r.ExportOverBtrfsSend = &w, &e
	}
}

// timeCold drops the page cache of the files under root, then times fn
// and adds the CPU time it took (this process's, both daemons being in it,
// and its children's) to *cpu.
func timeCold(root string, cpu *[]time.Duration, fn func() error) (time.Duration, error) {
	if err := dropPages(root); err != nil {
		return 0, err
	}
	before := cpuUsed()
	start := time.Now()
	err := fn()
	took := time.Since(start)
	*cpu = append(*cpu, cpuUsed()-before)
	return took, err
}

// cpuUsed is the user and system time of this process and its waited-for
// children so far.
func cpuUsed() time.Duration {
	var total time.Duration
	for _, who := range []int{unix.RUSAGE_SELF, unix.RUSAGE_CHILDREN} {
		var ru unix.Rusage
		if unix.Getrusage(who, &ru) == nil {
			total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	return total
}

// dropPages drops the pages of the files under root from the page cache,
// and no others: the host's other work keeps its cache.
func dropPages(root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOATIME|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("drop pages: %w", err)
		}
		defer unix.Close(fd)
		return unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED)
	})
}

func btrfsSend(ctx context.Context, progs, path string) error {
	cmd := exec.CommandContext(ctx, progs, "send", "-q", path)
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer devnull.Close()
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = devnull, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("btrfs send: %w: %s", err, stderr.Bytes())
	}
	return nil
}

// writeSequential writes size incompressible bytes to path, 4 MiB at a
// time, and fdatasyncs it; it returns how long that took.
func writeSequential(path string, size int64) (time.Duration, error) {
	buf := make([]byte, 4<<20)
	_, _ = rand.NewChaCha8([32]byte{'d', 'i', 's', 'k'}).Read(buf)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	start := time.Now()
	for left := size; left > 0; left -= int64(len(buf)) {
		buf[0]++ // no two blocks alike
		if _, err := f.Write(buf[:min(left, int64(len(buf)))]); err != nil {
			return 0, fmt.Errorf("write the disk-rate file: %w", err)
		}
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return 0, fmt.Errorf("write the disk-rate file: %w", err)
	}
	return time.Since(start), nil
}

// readDirect reads path with O_DIRECT, 4 MiB at a time.
func readDirect(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("O_DIRECT read: %w", err)
	}
	defer unix.Close(fd)
	raw := make([]byte, 4<<20+4096)
	off := (4096 - int(uintptr(unsafe.Pointer(&raw[0]))%4096)) % 4096
	buf := raw[off : off+4<<20]
	for {
		n, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("O_DIRECT read: %w", err)
		}
		if n == 0 {
			return nil
		}
	}
}
