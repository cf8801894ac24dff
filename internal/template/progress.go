package template

import (
	"context"
	"io"
	"io/fs"
	"path/filepath"
	"sync"
	"syscall"
)

// lockedWriter lets several goroutines (debootstrap's stdout and stderr)
// write whole lines to one progress writer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// treeSize adds up the bytes the tree's files and directories occupy,
// counting each hard-linked file once.
func treeSize(ctx context.Context, root string) (int64, error) {
	type devIno struct{ dev, ino uint64 }
	seen := map[devIno]bool{}
	var total int64
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n++; n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if st.Nlink > 1 && !d.IsDir() {
			k := devIno{uint64(st.Dev), st.Ino}
			if seen[k] {
				return nil
			}
			seen[k] = true
		}
		total += st.Blocks * 512
		return nil
	})
	return total, err
}
