package envdfs

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fspb "github.com/warrenhq/warren/api/gen/filesystem"
)

// ev is a filesystem event as a test compares it.
type ev string

func evOf(e *fspb.FilesystemEvent) ev {
	return ev(strings.TrimPrefix(e.Type.String(), "EVENT_TYPE_") + " " + e.Name)
}

type watchStream = connect.ServerStreamForClient[fspb.WatchDirResponse]

// watch opens a WatchDir stream and waits for its start event.
func (e *env) watch(t *testing.T, ctx context.Context, msg *fspb.WatchDirRequest, hdr http.Header) *watchStream {
	t.Helper()
	r := req(msg, "")
	for k, v := range hdr {
		r.Header()[k] = v
	}
	s, err := e.fs.WatchDir(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if !s.Receive() {
		t.Fatalf("no start event: %v", s.Err())
	}
	if s.Msg().GetStart() == nil {
		t.Fatalf("first message is not start: %v", s.Msg())
	}
	return s
}

// until receives filesystem events up to and including the first named
// marker, and returns them with the messages that carried them.
func until(t *testing.T, s *watchStream, marker string) ([]ev, []*fspb.FilesystemEvent) {
	t.Helper()
	var got []ev
	var raw []*fspb.FilesystemEvent
	for s.Receive() {
		fe := s.Msg().GetFilesystem()
		if fe == nil {
			continue // keepalive
		}
		got, raw = append(got, evOf(fe)), append(raw, fe)
		if fe.Name == marker {
			return got, raw
		}
	}
	t.Fatalf("stream ended before %s (after %v): %v", marker, got, s.Err())
	return nil, nil
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func wantEvents(t *testing.T, what string, got []ev, want ...ev) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got  %v\n want %v", what, got, want)
	}
}

func TestWatchDir(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	root := filepath.Join(e.home, "w")
	writeFixture(t, filepath.Join(root, "old.txt"), "old", userUID)
	mkdir(t, filepath.Join(root, "sub"))
	s := e.watch(t, ctx, &fspb.WatchDirRequest{Path: "w"}, nil)

	// Uploads show as envd's in-place writes would, not as the temporary
	// file and rename they are.
	e.upload(t, "", nil, [2]string{"w/new.txt", "1"})
	e.upload(t, "", nil, [2]string{"w/new.txt", "2"})
	if err := os.WriteFile(filepath.Join(root, "sub/inner"), []byte("x"), 0o644); err != nil {
		t.Fatal(err) // not recursive: unseen
	}
	if err := os.Chmod(filepath.Join(root, "old.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(root, "old.txt"), filepath.Join(root, "renamed.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root, "renamed.txt")); err != nil {
		t.Fatal(err)
	}
	mkdir(t, filepath.Join(root, "mark-1"))
	got, raw := until(t, s, "mark-1")
	wantEvents(t, "non-recursive", got,
		"CREATE new.txt", "WRITE new.txt", "WRITE new.txt", "CHMOD old.txt",
		"RENAME old.txt", "CREATE renamed.txt", "REMOVE renamed.txt", "CREATE mark-1")
	for _, fe := range raw {
		if fe.Entry != nil {
			t.Fatalf("entry without include_entry: %v", fe)
		}
	}
	// Appending from inside the sandbox is a plain WRITE.
	f, err := os.OpenFile(filepath.Join(root, "new.txt"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("more")
	f.Close()
	mkdir(t, filepath.Join(root, "mark-2"))
	got, _ = until(t, s, "mark-2")
	wantEvents(t, "append", got, "WRITE new.txt", "CREATE mark-2")
}

func TestWatchRecursive(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	root := filepath.Join(e.home, "r")
	mkdir(t, root)
	mkdir(t, filepath.Join(root, "n1"))
	s := e.watch(t, ctx, &fspb.WatchDirRequest{Path: root, Recursive: true, IncludeEntry: true}, nil)

	e.upload(t, "", nil, [2]string{"r/n1/f.txt", "x"})
	mkdir(t, filepath.Join(root, "n2"))
	got, raw := until(t, s, "n2")
	wantEvents(t, "existing subdirectory", got, "CREATE n1/f.txt", "WRITE n1/f.txt", "CREATE n2")
	if en := raw[0].Entry; en == nil || en.Path != filepath.Join(root, "n1/f.txt") || en.Owner != "user" || en.Size != 1 {
		t.Fatalf("entry of a created file: %v", raw[0])
	}
	// A directory made after the watch started is watched too.
	e.upload(t, "", nil, [2]string{"r/n2/g.txt", "y"})
	// One moved out of the tree is no longer.
	outside := filepath.Join(e.base, "outside")
	if err := os.Rename(filepath.Join(root, "n2"), outside); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "h.txt"), []byte("z"), 0o644); err != nil {
		t.Fatal(err)
	}
	mkdir(t, filepath.Join(root, "mark-1"))
	got, raw = until(t, s, "mark-1")
	wantEvents(t, "new and moved-away subdirectories", got, "CREATE n2/g.txt", "WRITE n2/g.txt", "RENAME n2", "CREATE mark-1")
	if raw[2].Entry != nil {
		t.Fatalf("entry of a path that is gone: %v", raw[2])
	}

	// What a new directory holds before its watch is in place is reported
	// as created (maybe twice, if it raced with the watch).
	if err := os.MkdirAll(filepath.Join(root, "deep/x/y"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "deep/x/y/z"), []byte("z"), 0o644); err != nil {
		t.Fatal(err)
	}
	mkdir(t, filepath.Join(root, "mark-2"))
	got, _ = until(t, s, "mark-2")
	for _, want := range []ev{"CREATE deep", "CREATE deep/x", "CREATE deep/x/y", "CREATE deep/x/y/z"} {
		if !slices.Contains(got, want) {
			t.Fatalf("mkdir -p and write: %v lacks %s", got, want)
		}
	}

	// Removing the watched directory ends the stream cleanly.
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	var last ev
	for s.Receive() {
		if fe := s.Msg().GetFilesystem(); fe != nil {
			last = evOf(fe)
		}
	}
	if s.Err() != nil || last != "REMOVE ." {
		t.Fatalf("after removing the watched directory: last event %q, err %v", last, s.Err())
	}
}

func TestWatchErrorsAndKeepalive(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	writeFixture(t, filepath.Join(e.home, "file.txt"), "x", userUID)
	for what, tc := range map[string]struct {
		path string
		code connect.Code
	}{
		"missing":   {"non_existing_watch_dir", connect.CodeNotFound},
		"a file":    {"file.txt", connect.CodeInvalidArgument},
		"NUL":       {"a\x00", connect.CodeInvalidArgument},
		"other's ~": {"~root", connect.CodeInvalidArgument},
	} {
		s, err := e.fs.WatchDir(ctx, req(&fspb.WatchDirRequest{Path: tc.path}, ""))
		if err == nil {
			if s.Receive() {
				t.Fatalf("watch %s: got %v", what, s.Msg())
			}
			err = s.Err()
			s.Close()
		}
		wantCode(t, "watch "+what, err, tc.code)
	}
	s := e.watch(t, ctx, &fspb.WatchDirRequest{Path: ""}, http.Header{"Keepalive-Ping-Interval": {"1"}})
	for s.Receive() {
		if s.Msg().GetKeepalive() != nil {
			return
		}
	}
	t.Fatalf("no keepalive: %v", s.Err())
}

// poll takes a polling watcher's events until a marker is among them.
func poll(t *testing.T, ctx context.Context, e *env, id, marker string) []ev {
	t.Helper()
	var got []ev
	for ctx.Err() == nil {
		r, err := e.fs.GetWatcherEvents(ctx, req(&fspb.GetWatcherEventsRequest{WatcherId: id}, ""))
		if err != nil {
			t.Fatalf("poll: %v (after %v)", err, got)
		}
		for _, fe := range r.Msg.Events {
			got = append(got, evOf(fe))
			if fe.Name == marker {
				return got
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no %s before the deadline; got %v", marker, got)
	return nil
}

func TestPollingWatcher(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	root := filepath.Join(e.home, "p")
	mkdir(t, root)
	cw, err := e.fs.CreateWatcher(ctx, req(&fspb.CreateWatcherRequest{Path: "p"}, ""))
	if err != nil {
		t.Fatal(err)
	}
	id := cw.Msg.WatcherId
	e.upload(t, "", nil, [2]string{"p/a.txt", "x"})
	if err := os.Remove(filepath.Join(root, "a.txt")); err != nil {
		t.Fatal(err)
	}
	mkdir(t, filepath.Join(root, "mark"))
	wantEvents(t, "polled", poll(t, ctx, e, id, "mark"), "CREATE a.txt", "WRITE a.txt", "REMOVE a.txt", "CREATE mark")

	if _, err := e.fs.RemoveWatcher(ctx, req(&fspb.RemoveWatcherRequest{WatcherId: id}, "")); err != nil {
		t.Fatal(err)
	}
	_, err = e.fs.GetWatcherEvents(ctx, req(&fspb.GetWatcherEventsRequest{WatcherId: id}, ""))
	wantCode(t, "poll a removed watcher", err, connect.CodeNotFound)
	_, err = e.fs.RemoveWatcher(ctx, req(&fspb.RemoveWatcherRequest{WatcherId: id}, ""))
	wantCode(t, "remove a removed watcher", err, connect.CodeNotFound)
	_, err = e.fs.CreateWatcher(ctx, req(&fspb.CreateWatcherRequest{Path: "missing"}, ""))
	wantCode(t, "watch a missing directory", err, connect.CodeNotFound)
	writeFixture(t, filepath.Join(e.home, "f"), "", userUID)
	_, err = e.fs.CreateWatcher(ctx, req(&fspb.CreateWatcherRequest{Path: "f"}, ""))
	wantCode(t, "watch a file", err, connect.CodeInvalidArgument)

	// When its directory goes, the queued events come first, then why.
	cw, err = e.fs.CreateWatcher(ctx, req(&fspb.CreateWatcherRequest{Path: "p"}, ""))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	var got []ev
	for ctx.Err() == nil {
		r, err := e.fs.GetWatcherEvents(ctx, req(&fspb.GetWatcherEventsRequest{WatcherId: cw.Msg.WatcherId}, ""))
		if err != nil {
			wantCode(t, "poll after the directory went", err, connect.CodeNotFound)
			break
		}
		for _, fe := range r.Msg.Events {
			got = append(got, evOf(fe))
		}
		time.Sleep(10 * time.Millisecond)
	}
	wantEvents(t, "directory removed", got, "REMOVE mark", "REMOVE .")
}

// A watcher polled too rarely stops once its queue is full, and says so
// after handing out what it queued.
func TestPollingWatcherQueueBound(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	root := filepath.Join(e.home, "q")
	mkdir(t, root)
	cw, err := e.fs.CreateWatcher(ctx, req(&fspb.CreateWatcherRequest{Path: "q"}, ""))
	if err != nil {
		t.Fatal(err)
	}
	pw, err := e.svc.watcher(cw.Msg.WatcherId)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i <= maxQueuedEvents; i++ {
		mkdir(t, filepath.Join(root, fmt.Sprint(i)))
	}
	for stopped := false; !stopped; time.Sleep(10 * time.Millisecond) {
		if ctx.Err() != nil {
			t.Fatal("the watcher never stopped")
		}
		pw.mu.Lock()
		stopped = pw.err != nil
		pw.mu.Unlock()
	}
	r, err := e.fs.GetWatcherEvents(ctx, req(&fspb.GetWatcherEventsRequest{WatcherId: cw.Msg.WatcherId}, ""))
	if err != nil {
		t.Fatalf("first poll: %v", err)
	}
	if len(r.Msg.Events) != maxQueuedEvents {
		t.Fatalf("first poll: %d events, want %d", len(r.Msg.Events), maxQueuedEvents)
	}
	_, err = e.fs.GetWatcherEvents(ctx, req(&fspb.GetWatcherEventsRequest{WatcherId: cw.Msg.WatcherId}, ""))
	wantCode(t, "poll a stopped watcher", err, connect.CodeResourceExhausted)
}

func TestPollingWatcherExpires(t *testing.T) {
	e := newEnvWith(t, Config{WatcherIdle: 20 * time.Millisecond})
	ctx := testCtx(t)
	cw, err := e.fs.CreateWatcher(ctx, req(&fspb.CreateWatcherRequest{Path: ""}, ""))
	if err != nil {
		t.Fatal(err)
	}
	for ctx.Err() == nil {
		_, err := e.fs.GetWatcherEvents(ctx, req(&fspb.GetWatcherEventsRequest{WatcherId: cw.Msg.WatcherId}, ""))
		if connect.CodeOf(err) == connect.CodeNotFound {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("an unpolled watcher never expired")
}
