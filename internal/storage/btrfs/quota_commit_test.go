package btrfs

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestQuotaTableGroupCommit sets the limits of many new groups at once and
// deletes half of them at once: every change is in the table on disk when
// its call returns, and the writes were shared.
func TestQuotaTableGroupCommit(t *testing.T) {
	ctx := context.Background()
	s := newPool(t, t.TempDir())
	const n = 40
	group := func(i int) string { return fmt.Sprintf("g%d", i) }
	onDisk := func() map[string]uint64 {
		t.Helper()
		tab, err := s.openGroupTable() // loads the file
		if err != nil {
			t.Fatal(err)
		}
		defer tab.close()
		return tab.groups
	}
	together := func(do func(i int) error, wantIn func(i int) bool) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = do(i)
				if errs[i] == nil {
					// Returned: the change must be in the file now.
					_, in := onDisk()[group(i)]
					if in != wantIn(i) {
						errs[i] = fmt.Errorf("group %s in the table on disk: %v right after its call returned", group(i), in)
					}
				}
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	}
	before := s.commits.batches
	together(func(i int) error { return s.SetGroupLimit(ctx, group(i), int64(i+1)<<20) }, func(int) bool { return true })
	created := s.commits.batches - before
	ids := onDisk()
	seen := map[uint64]bool{}
	for i := range n {
		id, ok := ids[group(i)]
		if !ok || seen[id] {
			t.Fatalf("group %s: id %d (in table %v, id taken twice %v)", group(i), id, ok, seen[id])
		}
		seen[id] = true
		if _, limit, err := s.GroupUsage(ctx, group(i)); err != nil || limit != int64(i+1)<<20 {
			t.Errorf("group %s: limit %d, err %v", group(i), limit, err)
		}
	}
	// Forty callers at once against a write of a millisecond or more: some
	// shared one (the count is the scheduler's; only "fewer" is checked).
	t.Logf("%d new groups in %d table writes", n, created)
	if created >= n {
		t.Errorf("%d new groups took %d table writes: none shared", n, created)
	}

	before = s.commits.batches
	together(func(i int) error {
		if i < n/2 {
			return nil
		}
		return s.DeleteGroup(ctx, group(i))
	}, func(i int) bool { return i < n/2 })
	t.Logf("%d deletes in %d table writes", n/2, s.commits.batches-before)
	ids = onDisk()
	for i := range n {
		if _, in := ids[group(i)]; in != (i < n/2) {
			t.Errorf("group %s in the table: %v after deleting the second half", group(i), in)
		}
	}
}

// quotaChildEnv names the data directory of the child process
// TestQuotaTableKilled kills.
const quotaChildEnv = "WARREN_TEST_QUOTA_CHILD"

// TestQuotaTableKilled kills a process (SIGKILL) that makes quota groups
// from many goroutines at once: every group whose SetGroupLimit had
// returned is in the table afterwards.
func TestQuotaTableKilled(t *testing.T) {
	if os.Getenv(quotaChildEnv) != "" {
		t.Skip("in the child")
	}
	dir := t.TempDir()
	s := newPool(t, dir)
	cmd := exec.Command(os.Args[0], "-test.run=^TestQuotaTableChild$", "-test.v")
	cmd.Env = append(os.Environ(), quotaChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var confirmed []string
	sc := bufio.NewScanner(out)
	deadline := time.Now().Add(2 * time.Minute)
	for len(confirmed) < 60 && time.Now().Before(deadline) && sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "made "); ok {
			confirmed = append(confirmed, name)
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if len(confirmed) < 60 {
		t.Fatalf("the child confirmed %d groups, want 60 (scan: %v)", len(confirmed), sc.Err())
	}
	tab, err := s.openGroupTable()
	if err != nil {
		t.Fatal(err)
	}
	defer tab.close()
	for _, name := range confirmed {
		if _, ok := tab.groups[name]; !ok {
			t.Errorf("group %s was made before the kill but is not in the table", name)
		}
	}
	t.Logf("%d groups confirmed before the kill, %d in the table", len(confirmed), len(tab.groups))
}

// TestQuotaTableChild is TestQuotaTableKilled's child: it makes groups
// from 8 goroutines until it is killed, printing each one made.
func TestQuotaTableChild(t *testing.T) {
	dir := os.Getenv(quotaChildEnv)
	if dir == "" {
		t.Skip("run by TestQuotaTableKilled")
	}
	s, err := Open(context.Background(), Options{DataDir: dir, ImageSize: testImageSize, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				name := fmt.Sprintf("w%dg%d", w, i)
				if err := s.SetGroupLimit(context.Background(), name, 1<<20); err != nil {
					fmt.Fprintln(os.Stderr, "child:", err)
					return
				}
				mu.Lock()
				fmt.Printf("made %s\n", name)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}
