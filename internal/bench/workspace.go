package bench

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// layout is the synthetic workspace the snapshot suite works on: files
// spread round-robin over dirs, sizes varying around the mean so that they
// add up to total exactly.
type layout struct {
	files int
	dirs  int
	total int64
}

func newLayout(files int, total int64) layout {
	dirs := 1000
	if files < dirs {
		dirs = files
	}
	return layout{files: files, dirs: dirs, total: total}
}

// dir is the directory (relative to the workspace) holding file i's
// neighbours; dir(i) for i in [0, dirs) names every directory.
func (l layout) dir(i int) string { return fmt.Sprintf("d%04d", i%l.dirs) }

// file is file i's path relative to the workspace.
func (l layout) file(i int) string { return fmt.Sprintf("%s/f%06d", l.dir(i), i) }

// creationOrder yields every file index, one directory after another, as
// a checkout or an unpacked archive creates them. btrfs numbers inodes in
// creation order and keys a file's items by its inode, so a directory's
// files then sit in a few neighbouring leaves; created in index order they
// would be spread over the whole tree, one leaf each.
func (l layout) creationOrder() iter.Seq[int] {
	return func(yield func(int) bool) {
		for d := 0; d < l.dirs; d++ {
			for i := d; i < l.files; i += l.dirs {
				if !yield(i) {
					return
				}
			}
		}
	}
}

// size is file i's size. Pairs of files move the same amount above and
// below the mean (up to 3/4 of it), so the sizes vary like a source tree's
// while their sum stays total; the remainder of the division goes to file 0.
func (l layout) size(i int) int64 {
	base := l.total / int64(l.files)
	s := base
	if i == 0 {
		s += l.total % int64(l.files)
	}
	pair := i / 2
	if i%2 == 1 || i+1 < l.files { // an odd file at the end has no partner
		delta := base * 3 / 4 * int64(pair*7919%1000) / 1000
		if i%2 == 0 {
			s += delta
		} else {
			s -= delta
		}
	}
	return s
}

// writeWorkspace writes the layout under root (a host path inside a live
// sandbox volume), files and directories owned by uid:gid, with a few
// writers at once, then writes the filesystem back to disk. It returns how
// long the writes and the sync took. The sandbox is one the bench has just
// created and nothing but its agent runs there, so plain path operations
// are safe here.
func writeWorkspace(ctx context.Context, root string, l layout, uid, gid int) (write, synced time.Duration, err error) {
	start := time.Now()
	for i := 0; i < l.dirs; i++ {
		p := filepath.Join(root, l.dir(i))
		if err := os.Mkdir(p, 0o755); err != nil {
			return 0, 0, fmt.Errorf("make workspace dir: %w", err)
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return 0, 0, fmt.Errorf("chown workspace dir: %w", err)
		}
	}
	// Incompressible content; one buffer serves every file from a
	// different offset.
	buf := make([]byte, 4<<20)
	rng := rand.NewChaCha8([32]byte{'w', 'a', 'r', 'r', 'e', 'n'})
	_, _ = rng.Read(buf)

	const writers = 4
	next := make(chan int)
	errc := make(chan error, writers)
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := writeFile(filepath.Join(root, l.file(i)), buf, i, l.size(i), uid, gid); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	var sendErr error
feed:
	for i := range l.creationOrder() {
		select {
		case next <- i:
		case err := <-errc:
			sendErr = err
			break feed
		case <-ctx.Done():
			sendErr = ctx.Err()
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errc)
	if sendErr == nil {
		sendErr = <-errc
	}
	if sendErr != nil {
		return 0, 0, fmt.Errorf("write workspace: %w", sendErr)
	}
	write = time.Since(start)

	start = time.Now()
	f, err := os.Open(root)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return 0, 0, fmt.Errorf("sync workspace: %w", err)
	}
	return write, time.Since(start), nil
}

func writeFile(path string, buf []byte, i int, size int64, uid, gid int) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	off := (i * 4099) % len(buf)
	for size > 0 {
		n := int64(len(buf) - off)
		if n > size {
			n = size
		}
		if _, err := f.Write(buf[off : off+int(n)]); err != nil {
			f.Close()
			return err
		}
		size -= n
		off = 0
	}
	if err := f.Chown(uid, gid); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
