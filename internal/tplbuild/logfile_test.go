package tplbuild

import (
	"os"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/store"
)

// A finished build's log outlives the server: a new service (a restart)
// reads it back, the failure's lines with it, and a huge log is cut to
// the bound.
func TestBuildLogKeptOnDisk(t *testing.T) {
	dir := t.TempDir()
	s := New(Config{Dir: dir})
	l := &buildLog{}
	l.add("info", "1", "step %d", 1)
	l.failure = l.output("error", "1", "boom\n")
	s.saveLog("b1", l)

	got := New(Config{Dir: dir}).loadLog("b1")
	if got == nil || len(got.entries) != 2 || got.entries[1].Message != "boom" || len(got.failure) != 1 {
		t.Fatalf("loaded log = %+v", got)
	}
	if New(Config{Dir: dir}).loadLog("none") != nil || s.loadLog("../x") != nil {
		t.Fatal("a build without a log file (or a bad id) must load none")
	}

	big := &buildLog{}
	line := strings.Repeat("x", 1000)
	for range 10000 {
		big.add("info", "1", "%s", line)
	}
	s.saveLog("b2", big)
	if n := len(s.loadLog("b2").entries); n == 0 || n*1000 > maxLogFileBytes {
		t.Fatalf("kept %d entries of 1000 bytes, bound %d bytes", n, maxLogFileBytes)
	}
}

// A template's delete takes its builds' log files with it; a restart
// sweeps the logs of builds the database no longer has (a delete cut
// short, or builds pruned by a retention) and keeps the others.
func TestBuildLogsGoWithTheirBuilds(t *testing.T) {
	ctx, st, s := testService(t)
	gone := builtWith(t, st, "t1", "gone", store.BuildParent{Kind: store.ParentTemplate, Name: "base"}, 0, 1)
	kept := builtWith(t, st, "t1", "kept", store.BuildParent{Kind: store.ParentTemplate, Name: "base"}, 0, 1)
	for _, id := range []string{gone.ID, kept.ID, "orphanbuild"} {
		l := &buildLog{}
		l.add("info", "1", "line of %s", id)
		s.saveLog(id, l)
	}
	if err := s.Delete(ctx, "t1", "gone"); err != nil {
		t.Fatal(err)
	}
	exists := func(id string) bool { _, err := os.Stat(s.logPath(id)); return err == nil }
	if exists(gone.ID) || !exists(kept.ID) || !exists("orphanbuild") {
		t.Fatalf("after the delete: gone %v kept %v orphan %v", exists(gone.ID), exists(kept.ID), exists("orphanbuild"))
	}
	if err := New(Config{Store: st, Dir: s.cfg.Dir}).Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if !exists(kept.ID) || exists("orphanbuild") {
		t.Fatalf("after the sweep: kept %v orphan %v", exists(kept.ID), exists("orphanbuild"))
	}
}
