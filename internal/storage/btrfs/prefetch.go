package btrfs

import (
	"cmp"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The send ioctl reads the files it sends itself, one extent after another
// with the page cache's own readahead, and waits for each read: a cold
// whole export ran at about half the disk's sequential rate (and `btrfs
// send` alike), though a send from the page cache runs faster than the disk.
// A prefetcher reads the files into the page cache a bounded distance ahead
// of the send, in the order the send takes them (inode number), with
// enough requests in flight to keep the disk busy, and drops again the
// pages it brought in once the send is past them (the send drops what it
// read itself only for files with no cached page when it reaches them).
const (
	prefetchWindow = 64 << 20 // bytes read ahead of the send at most
	prefetchChunk  = 4 << 20  // one readahead request (the kernel caps one call near the bdi's window)
	// prefetchSlack is how far past a file's end (as the stream goes) the
	// send must be before its pages are dropped: the stream carries a
	// command header per 48 KiB and a few commands per file beside the data.
	prefetchSlack = 8 << 20
)

// prefetchFile is a regular file of the volume, in send order.
type prefetchFile struct {
	path string
	ino  uint64
	size int64
	end  int64 // where it ends in the stream, roughly: the data before it and its own
}

// prefetcher reads a volume's files ahead of a send; sent is how much of
// the stream has come out of the send so far.
type prefetcher struct {
	root string
	sent atomic.Int64
	held []heldFile // prefetched, its pages not dropped yet, in send order
}

type heldFile struct {
	f   *os.File
	end int64
}

// filesInSendOrder lists root's regular files larger than what btrfs keeps
// inline in its metadata, by inode number.
func filesInSendOrder(ctx context.Context, root string) []prefetchFile {
	var files []prefetchFile
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // the send reports what it cannot read
		}
		if ctx.Err() != nil {
			return filepath.SkipAll
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil || info.Size() <= 4096 {
			return nil
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		files = append(files, prefetchFile{path: p, ino: st.Ino, size: info.Size()})
		return nil
	})
	slices.SortFunc(files, func(a, b prefetchFile) int { return cmp.Compare(a.ino, b.ino) })
	var at int64
	for i := range files {
		at += files[i].size + files[i].size/500 + 1024
		files[i].end = at
	}
	return files
}

// run prefetches until ctx ends or every file has been read ahead, then
// drops what it brought in as the send passes it; it returns once every
// such file is dropped or ctx has ended (dropping the rest then).
func (p *prefetcher) run(ctx context.Context) {
	defer p.dropAll()
	files := filesInSendOrder(ctx, p.root)
	var ahead int64 // stream position up to which files were read ahead
	for _, pf := range files {
		if pf.end < p.sent.Load() {
			ahead = pf.end
			continue // the send is past it already
		}
		f := p.open(pf)
		for off := int64(0); off < pf.size; off += prefetchChunk {
			for ahead+min(prefetchChunk, pf.size-off)-p.sent.Load() > prefetchWindow {
				if !p.pause(ctx) {
					if f != nil {
						f.Close()
					}
					return
				}
			}
			if f != nil {
				_ = unix.Fadvise(int(f.Fd()), off, prefetchChunk, unix.FADV_WILLNEED)
			}
			ahead += min(prefetchChunk, pf.size-off)
		}
		ahead = pf.end
		if f != nil {
			p.held = append(p.held, heldFile{f: f, end: pf.end})
		}
		p.dropPassed()
	}
	for len(p.held) > 0 && p.pause(ctx) {
		p.dropPassed()
	}
}

// open opens a file to read ahead, or returns nil when some of it is in the
// page cache already: the send then leaves its pages alone, and so does
// the prefetcher.
func (p *prefetcher) open(pf prefetchFile) *os.File {
	f, err := os.OpenFile(pf.path, os.O_RDONLY|unix.O_NOATIME|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil
	}
	var cs unix.Cachestat_t
	if err := unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{Off: 0, Len: 0}, &cs, 0); err != nil || cs.Cache > 0 {
		f.Close()
		return nil
	}
	return f
}

// pause waits a little for the send to move on; false when ctx has ended.
func (p *prefetcher) pause(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(2 * time.Millisecond):
		return true
	}
}

// dropPassed drops the pages of the files the send is past.
func (p *prefetcher) dropPassed() {
	sent := p.sent.Load()
	n := 0
	for n < len(p.held) && p.held[n].end+prefetchSlack < sent {
		drop(p.held[n].f)
		n++
	}
	p.held = p.held[n:]
}

func (p *prefetcher) dropAll() {
	for _, h := range p.held {
		drop(h.f)
	}
	p.held = nil
}

func drop(f *os.File) {
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	f.Close()
}
