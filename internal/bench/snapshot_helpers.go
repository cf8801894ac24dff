package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/storage/treediff"
)

// walkTrees is the diff baseline: every path of both trees compared.
func walkTrees(ctx context.Context, from, to string) ([]storage.Change, error) {
	return treediff.Walk(ctx, from, to, treediff.Options{SameInodes: true})
}

// copyTree copies src with `cp -a` into a new scratch volume named name and
// writes it back to disk, returning how long both took. The volume is
// deleted before returning.
func copyTree(ctx context.Context, st storage.Storage, src, name string) (_ time.Duration, retErr error) {
	key := storage.Key{Kind: storage.KindScratch, Name: name}
	vol, err := st.Create(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("make scratch volume for the copy: %w", err)
	}
	defer func() {
		if err := st.Delete(context.WithoutCancel(ctx), key); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("delete the copy: %w", err))
		}
	}()
	start := time.Now()
	if out, err := exec.CommandContext(ctx, "cp", "-a", src, filepath.Join(vol, "copy")).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("cp -a: %w: %s", err, out)
	}
	f, err := os.Open(vol)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return 0, fmt.Errorf("sync the copy: %w", err)
	}
	return time.Since(start), nil
}

// parallel runs fn for every id at once: the calls are released together
// once every goroutine is ready. When took is non-nil, took[i] receives how
// long fn(i, ids[i]) took.
func parallel(ids []string, took []time.Duration, fn func(i int, id string) error) error {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, len(ids))
	for i, id := range ids {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			t0 := time.Now()
			errs[i] = fn(i, id)
			if took != nil {
				took[i] = time.Since(t0)
			}
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	return errors.Join(errs...)
}
