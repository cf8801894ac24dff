package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/warrenhq/warren/client"
)

// FilesReport is file transfer through the API against the same bytes
// written to and read from the host's disk directly (the floor any API
// pays on top of).
type FilesReport struct {
	Write4KiB     Stats   `json:"write_4kib"`
	Read4KiB      Stats   `json:"read_4kib"`
	Write10MB     Stats   `json:"write_10mb"`
	Read10MB      Stats   `json:"read_10mb"`
	HostWrite10MB Stats   `json:"baseline_host_write_10mb"`
	HostRead10MB  Stats   `json:"baseline_host_read_10mb"`
	Write10MBMBps float64 `json:"write_10mb_mb_per_s_p50"`
	Read10MBMBps  float64 `json:"read_10mb_mb_per_s_p50"`
}

// ForkReport is POST /fork of a small sandbox's live state, one and ten
// at a time, until every fork runs.
type ForkReport struct {
	Fork1  Stats `json:"fork_x1"`
	Fork10 Stats `json:"fork_x10"`
}

// measureFiles times the files API on sandbox id; scratch is a host
// directory on the same disk for the baseline.
func measureFiles(ctx context.Context, c *client.Client, id, scratch string, n int) (FilesReport, error) {
	var rep FilesReport
	small := make([]byte, 4<<10)
	big := make([]byte, 10<<20)
	if _, err := rand.Read(small); err != nil {
		return rep, err
	}
	if _, err := rand.Read(big); err != nil {
		return rep, err
	}
	bigN := max(n/10, 3)
	var err error
	write := func(data []byte, path string) func() error {
		return func() error { return putFile(ctx, c, id, path, data) }
	}
	read := func(path string, size int) func() error {
		return func() error { return getFile(ctx, c, id, path, size) }
	}
	var samples []time.Duration
	if samples, err = timeN(n, write(small, "/workspace/small.bin")); err != nil {
		return rep, fmt.Errorf("write 4 KiB: %w", err)
	}
	rep.Write4KiB = Summarise(samples)
	if samples, err = timeN(n, read("/workspace/small.bin", len(small))); err != nil {
		return rep, fmt.Errorf("read 4 KiB: %w", err)
	}
	rep.Read4KiB = Summarise(samples)
	if samples, err = timeN(bigN, write(big, "/workspace/big.bin")); err != nil {
		return rep, fmt.Errorf("write 10 MB: %w", err)
	}
	rep.Write10MB = Summarise(samples)
	if samples, err = timeN(bigN, read("/workspace/big.bin", len(big))); err != nil {
		return rep, fmt.Errorf("read 10 MB: %w", err)
	}
	rep.Read10MB = Summarise(samples)

	hostFile := filepath.Join(scratch, "host-big.bin")
	defer os.Remove(hostFile)
	if samples, err = timeN(bigN, func() error { return os.WriteFile(hostFile, big, 0o644) }); err != nil {
		return rep, err
	}
	rep.HostWrite10MB = Summarise(samples)
	if samples, err = timeN(bigN, func() error { _, err := os.ReadFile(hostFile); return err }); err != nil {
		return rep, err
	}
	rep.HostRead10MB = Summarise(samples)
	mbps := func(s Stats) float64 {
		if s.P50 <= 0 {
			return 0
		}
		return round2(float64(len(big)) / (1 << 20) / (s.P50 / 1000))
	}
	rep.Write10MBMBps, rep.Read10MBMBps = mbps(rep.Write10MB), mbps(rep.Read10MB)
	return rep, nil
}

// measureForks times forks of sandbox id's live state: n of one, then n
// of ten; the forks are deleted between rounds.
func measureForks(ctx context.Context, c *client.Client, id string, n int) (ForkReport, error) {
	var rep ForkReport
	round := func(count int) ([]time.Duration, error) {
		var out []time.Duration
		for i := 0; i < n; i++ {
			took, forks, err := forkTimed(ctx, c, id, count)
			if err != nil {
				return nil, err
			}
			out = append(out, took)
			for _, f := range forks {
				if err := c.Sandboxes.Delete(ctx, f); err != nil {
					return nil, err
				}
			}
		}
		return out, nil
	}
	one, err := round(1)
	if err != nil {
		return rep, fmt.Errorf("fork ×1: %w", err)
	}
	ten, err := round(10)
	if err != nil {
		return rep, fmt.Errorf("fork ×10: %w", err)
	}
	rep.Fork1, rep.Fork10 = Summarise(one), Summarise(ten)
	return rep, nil
}

// putFile writes data to path in sandbox id through the files API.
func putFile(ctx context.Context, c *client.Client, id, path string, data []byte) error {
	_, err := c.Files.Write(ctx, id, path, bytes.NewReader(data), 0o644, "")
	return err
}

// getFile reads path from sandbox id through the files API to the end and
// checks that it holds size bytes.
func getFile(ctx context.Context, c *client.Client, id, path string, size int) error {
	rc, err := c.Files.Read(ctx, id, path)
	if err != nil {
		return err
	}
	defer rc.Close()
	got, err := io.Copy(io.Discard, rc)
	if err == nil && got != int64(size) {
		err = fmt.Errorf("read %d bytes of %d", got, size)
	}
	return err
}

// forkTimed forks sandbox id's live state into count sandboxes and times
// the call, which returns once every fork runs; it returns the forks' ids,
// which the caller deletes (also on error: the ids of the forks made).
func forkTimed(ctx context.Context, c *client.Client, id string, count int) (time.Duration, []string, error) {
	start := time.Now()
	res, err := c.Snapshots.Fork(ctx, id, client.ForkRequest{Count: count})
	took := time.Since(start)
	if err != nil {
		return 0, nil, err
	}
	var ids []string
	var failed error
	for _, f := range res {
		if f.Sandbox == nil {
			failed = fmt.Errorf("a fork failed: %+v", f.Error)
			continue
		}
		ids = append(ids, f.Sandbox.SandboxID)
	}
	return took, ids, failed
}
