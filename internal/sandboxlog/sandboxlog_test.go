package sandboxlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/procs"
)

const sb = "sbxtest"

func messages(es []Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Message)
	}
	return out
}

func read(t *testing.T, l *Logs, q Query) Page {
	t.Helper()
	p, err := l.Read(context.Background(), sb, q)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLinesAndProcesses(t *testing.T) {
	l := New(Options{Dir: t.TempDir()})
	web := procs.ProcessID{PID: 7, Seq: 1, Tag: "web"}
	l.Started(sb, web, []string{"python3", "-m", "http.server"})
	l.Output(sb, web, false, 0, []byte("hel"))
	l.Output(sb, web, false, 3, []byte("lo\r\nwor"))
	l.Output(sb, web, true, 0, []byte("oops\n"))
	l.Output(sb, web, false, 10, []byte("ld"))
	l.Exited(sb, web, procs.Exit{ExitCode: 3})
	l.Event(sb, "info", "paused (api)")

	p := read(t, l, Query{})
	want := []string{"started: python3 -m http.server", "hello", "oops", "world", "exited: code 3", "paused (api)"}
	if got := messages(p.Entries); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("messages %q, want %q", got, want)
	}
	for i, e := range p.Entries {
		if e.Seq != int64(i+1) {
			t.Fatalf("entry %d has seq %d", i, e.Seq)
		}
	}
	if e := p.Entries[2]; e.Source != SourceStderr || e.Level != "error" || e.PID != 7 || e.Tag != "web" {
		t.Fatalf("stderr entry %+v", e)
	}
	if e := p.Entries[4]; e.Source != SourceProcess || e.Level != "warn" {
		t.Fatalf("exit entry %+v", e)
	}
	if p.Next != 6 {
		t.Fatalf("next %d", p.Next)
	}

	// Resume from a cursor, filter by level and text.
	if got := messages(read(t, l, Query{After: 4}).Entries); len(got) != 2 || got[0] != "exited: code 3" {
		t.Fatalf("after 4: %q", got)
	}
	if got := messages(read(t, l, Query{Level: "warn"}).Entries); len(got) != 2 || got[0] != "oops" {
		t.Fatalf("warn and up: %q", got)
	}
	filtered := read(t, l, Query{Search: "wor"})
	if got := messages(filtered.Entries); len(got) != 1 || got[0] != "world" || filtered.Next != 6 {
		t.Fatalf("search: %q next %d", got, filtered.Next)
	}
	// Backward: newest first, bounded, and a cursor to page on.
	back := read(t, l, Query{Backward: true, Limit: 2})
	if got := messages(back.Entries); strings.Join(got, "|") != "paused (api)|exited: code 3" || back.Next != 5 {
		t.Fatalf("backward: %q next %d", got, back.Next)
	}
	back = read(t, l, Query{Backward: true, Limit: 2, After: back.Next})
	if got := messages(back.Entries); strings.Join(got, "|") != "world|oops" {
		t.Fatalf("backward page 2: %q", got)
	}
}

func TestLongLinesAreSplit(t *testing.T) {
	l := New(Options{Dir: t.TempDir()})
	long := strings.Repeat("x", MaxLine*2+10)
	p := procs.ProcessID{PID: 1, Seq: 1}
	l.Output(sb, p, false, 0, []byte(long[:MaxLine+5])) // no newline yet: a piece is emitted
	l.Output(sb, p, false, MaxLine+5, []byte(long[MaxLine+5:]+"\n"))
	var joined string
	page := read(t, l, Query{})
	for _, e := range page.Entries {
		if len(e.Message) > MaxLine {
			t.Fatalf("entry of %d bytes", len(e.Message))
		}
		joined += e.Message
	}
	if joined != long || len(page.Entries) != 3 {
		t.Fatalf("%d entries, rejoined %d bytes of %d", len(page.Entries), len(joined), len(long))
	}
}

// TestRotationAndSeek writes far more than the budget: the log stays
// within it, keeps the newest entries, and reads from any cursor (through
// the binary search) return exactly the entries after it.
func TestRotationAndSeek(t *testing.T) {
	dir := t.TempDir()
	clock := time.Unix(1_700_000_000, 0)
	now := func() time.Time { clock = clock.Add(time.Millisecond); return clock }
	l := New(Options{Dir: dir, MaxBytes: 1 << 20, Now: now})
	const n = 30000
	var off uint64
	for i := 1; i <= n; i++ {
		line := fmt.Appendf(nil, "line %d %s\n", i, strings.Repeat("=", i%97))
		l.Output(sb, procs.ProcessID{PID: 1, Seq: 1}, false, off, line)
		off += uint64(len(line))
	}
	var total int64
	for _, f := range []string{"current.log", "previous.log"} {
		fi, err := os.Stat(filepath.Join(dir, sb, f))
		if err != nil {
			t.Fatal(err)
		}
		total += fi.Size()
	}
	if total > 1<<20 {
		t.Fatalf("log holds %d bytes, budget %d", total, 1<<20)
	}
	all := read(t, l, Query{})
	first := all.Entries[0].Seq
	if last := all.Entries[len(all.Entries)-1]; last.Seq != n || !strings.HasPrefix(last.Message, fmt.Sprintf("line %d ", n)) {
		t.Fatalf("last entry %+v", last)
	}
	if first < 2 || len(all.Entries) != int(n-first+1) {
		t.Fatalf("kept %d entries from %d", len(all.Entries), first)
	}
	for _, after := range []int64{0, first - 1, first, first + 1, first + 500, n / 2, n - 300, n - 1, n, n + 5} {
		p := read(t, l, Query{After: after, Limit: 3})
		wantFirst := max(after+1, first)
		if wantFirst > n {
			if len(p.Entries) != 0 {
				t.Fatalf("after %d: %d entries", after, len(p.Entries))
			}
			continue
		}
		if len(p.Entries) == 0 || p.Entries[0].Seq != wantFirst || !strings.HasPrefix(p.Entries[0].Message, fmt.Sprintf("line %d ", wantFirst)) {
			t.Fatalf("after %d: got %+v, want seq %d first", after, p.Entries, wantFirst)
		}
	}
	// The time cursor: entry i was written at base + i ms.
	since := time.Unix(1_700_000_000, 0).Add(time.Duration(n-10) * time.Millisecond)
	if p := read(t, l, Query{Since: since}); len(p.Entries) != 11 || p.Entries[0].Seq != n-10 {
		t.Fatalf("since: %d entries from %d", len(p.Entries), p.Entries[0].Seq)
	}
}

func TestReopenContinuesAndSkipsTornLines(t *testing.T) {
	dir := t.TempDir()
	l := New(Options{Dir: dir})
	l.Event(sb, "info", "one")
	l.Event(sb, "info", "two")
	// A crash mid-write leaves a torn line.
	f, err := os.OpenFile(filepath.Join(dir, sb, "current.log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"seq":3,"ts":"2026-`)
	f.Close()

	l2 := New(Options{Dir: dir})
	l2.Event(sb, "info", "three")
	// "three" was appended after the torn bytes, on the same line: it is
	// lost with them, but numbering goes on and later entries are read.
	l2.Event(sb, "info", "four")
	p, err := l2.Read(context.Background(), sb, Query{})
	if err != nil {
		t.Fatal(err)
	}
	got := messages(p.Entries)
	if got[0] != "one" || got[1] != "two" || got[len(got)-1] != "four" || p.Entries[len(p.Entries)-1].Seq != 4 {
		t.Fatalf("after reopen: %q (%+v)", got, p.Entries)
	}
}

func TestWaitFollows(t *testing.T) {
	l := New(Options{Dir: t.TempDir()})
	l.Event(sb, "info", "first")
	go func() {
		time.Sleep(50 * time.Millisecond)
		l.Event(sb, "debug", "skipped by the level filter")
		time.Sleep(50 * time.Millisecond)
		l.Event(sb, "info", "second")
	}()
	p := read(t, l, Query{After: 1, Level: "info", Wait: 10 * time.Second})
	if got := messages(p.Entries); len(got) != 1 || got[0] != "second" || p.Next != 3 {
		t.Fatalf("waited for %q next %d", got, p.Next)
	}
	// Nothing new: the wait ends empty, the cursor stays.
	p = read(t, l, Query{After: 3, Wait: 30 * time.Millisecond})
	if len(p.Entries) != 0 || p.Next != 3 {
		t.Fatalf("empty wait: %+v", p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Read(ctx, sb, Query{After: 3, Wait: time.Hour}); err != nil {
		t.Fatalf("cancelled wait: %v", err)
	}
}

func TestRemoveAndBadInput(t *testing.T) {
	dir := t.TempDir()
	l := New(Options{Dir: dir})
	l.Event(sb, "info", "x")
	l.Event("other1", "info", "y")
	if err := l.Remove(sb); err != nil {
		t.Fatal(err)
	}
	l.Event(sb, "info", "destroyed") // late: dropped, nothing recreated
	if _, err := os.Stat(filepath.Join(dir, sb)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("log dir after remove: %v", err)
	}
	if _, err := l.Read(context.Background(), sb, Query{}); !errdefs.IsNotFound(err) {
		t.Fatalf("read removed: %v", err)
	}
	if err := l.Reconcile(map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "other1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("reconcile kept an unknown log: %v", err)
	}
	for _, id := range []string{"../x", "", "a/b"} {
		l.Event(id, "info", "nope")
		if _, err := l.Read(context.Background(), id, Query{}); err == nil {
			t.Fatalf("read of %q worked", id)
		}
	}
	if _, err := l.Read(context.Background(), "ok", Query{Level: "loud"}); !errdefs.IsInvalid(err) {
		t.Fatalf("bad level: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("bad ids made %d entries", len(entries))
	}
	var nilLogs *Logs
	nilLogs.Event(sb, "info", "x")
	nilLogs.Output(sb, procs.ProcessID{PID: 1}, false, 0, []byte("x\n"))
	if err := nilLogs.Remove(sb); err != nil {
		t.Fatal(err)
	}
}

// TestReplayAfterRestart plays the agent's replay after a daemon kill -9:
// starts, output and exits the log already holds are not logged again, and
// a line cut by the crash is completed from the replay.
func TestReplayAfterRestart(t *testing.T) {
	dir := t.TempDir()
	p := procs.ProcessID{PID: 9, Seq: 4, Tag: "loop"}
	q := procs.ProcessID{PID: 10, Seq: 5}
	l := New(Options{Dir: dir})
	l.Started(sb, p, []string{"loop"})
	l.Output(sb, p, false, 0, []byte("a\nb\npart"))
	l.Started(sb, q, []string{"short"})
	l.Output(sb, q, false, 0, []byte("done\n"))
	l.Exited(sb, q, procs.Exit{})

	// The daemon dies; a new one replays from the offsets the collector
	// had saved (older than what the log took).
	l = New(Options{Dir: dir})
	l.Started(sb, p, []string{"loop"})
	l.Output(sb, p, false, 2, []byte("b\npartial line\nc\n"))
	l.Started(sb, q, []string{"short"})
	l.Output(sb, q, false, 0, []byte("done\n"))
	l.Exited(sb, q, procs.Exit{})
	l.Output(sb, p, false, 19, []byte("d\n"))
	l.Exited(sb, p, procs.Exit{ExitCode: 1})

	got := messages(read(t, l, Query{}).Entries)
	want := []string{"started: loop", "a", "b", "started: short", "done", "exited: code 0", "partial line", "c", "d", "exited: code 1"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("after the replay:\n got %q\nwant %q", got, want)
	}
}

func TestCloseReleasesFilesAndKeepsLogs(t *testing.T) {
	dir := t.TempDir()
	// Only descriptors of files under dir count: the test binary opens and
	// closes others (earlier tests' files, the runtime's) meanwhile.
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range ents {
			if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(target, dir+"/") {
				n++
			}
		}
		return n
	}
	l := New(Options{Dir: dir})
	for i := range 50 {
		l.Event(fmt.Sprintf("sbx%d", i), "info", "created")
	}
	if n := fds(); n < 50 {
		t.Fatalf("%d files of the log dir open with 50 logs: the logs should hold their files", n)
	}
	l.Close()
	if n := fds(); n > 0 {
		t.Fatalf("%d files of the log dir open after Close", n)
	}
	l.Event("sbx0", "info", "after close") // dropped, no panic

	again := New(Options{Dir: dir})
	defer again.Close()
	p, err := again.Read(context.Background(), "sbx0", Query{})
	if err != nil {
		t.Fatal(err)
	}
	if got := messages(p.Entries); len(got) != 1 || got[0] != "created" {
		t.Fatalf("after reopening: %q, want [created]", got)
	}
}
