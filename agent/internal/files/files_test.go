package files

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/agent/internal/agenttest"
	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
	"github.com/warrenhq/warren/api/gen/warren/agent/v1/agentv1connect"
)

func newClient(t *testing.T) (agentv1connect.FilesServiceClient, string) {
	t.Helper()
	ws := t.TempDir()
	mux := http.NewServeMux()
	New(Config{Workspace: ws, Users: agenttest.Users(t)}).Handle(mux)
	hc, url := agenttest.Serve(t, mux)
	return agentv1connect.NewFilesServiceClient(hc, url), ws
}

func write(t *testing.T, c agentv1connect.FilesServiceClient, hdr *agentv1.WriteFileHeader, chunks ...[]byte) (*agentv1.EntryInfo, error) {
	t.Helper()
	st := c.WriteFile(context.Background())
	if err := st.Send(&agentv1.WriteFileRequest{Header: hdr}); err != nil {
		t.Fatal(err)
	}
	for _, ch := range chunks {
		if err := st.Send(&agentv1.WriteFileRequest{Data: ch}); err != nil {
			break // the server answered early; CloseAndReceive has the error
		}
	}
	resp, err := st.CloseAndReceive()
	if err != nil {
		return nil, err
	}
	return resp.Msg.Entry, nil
}

func read(t *testing.T, c agentv1connect.FilesServiceClient, path string) (*agentv1.EntryInfo, []byte, error) {
	t.Helper()
	st, err := c.ReadFile(context.Background(), connect.NewRequest(&agentv1.ReadFileRequest{Path: path}))
	if err != nil {
		return nil, nil, err
	}
	defer st.Close()
	var info *agentv1.EntryInfo
	var data bytes.Buffer
	for st.Receive() {
		if i := st.Msg().GetInfo(); i != nil {
			if info != nil || data.Len() > 0 {
				t.Fatal("info not first or twice")
			}
			info = i
		}
		if len(st.Msg().GetData()) > readChunk {
			t.Fatalf("chunk of %d bytes", len(st.Msg().GetData()))
		}
		data.Write(st.Msg().GetData())
	}
	return info, data.Bytes(), st.Err()
}

func wantCode(t *testing.T, what string, err error, code connect.Code) {
	t.Helper()
	if connect.CodeOf(err) != code {
		t.Fatalf("%s: want %v, got %v", what, code, err)
	}
	if err != nil && !strings.Contains(err.Error(), "/") {
		t.Fatalf("%s: message names no path: %v", what, err)
	}
}

func TestWriteReadStatListMoveRemove(t *testing.T) {
	c, ws := newClient(t)
	ctx := context.Background()
	big := bytes.Repeat([]byte("0123456789abcdef"), 200000) // 3.2 MB: several read chunks
	e, err := write(t, c, &agentv1.WriteFileHeader{Path: "dir/a.txt", MakeParents: true, Mode: 0o600}, big[:1<<20], big[1<<20:])
	if err != nil {
		t.Fatal(err)
	}
	wantOwner := "user" // agenttest.Users makes "user" the test's own uid
	if os.Getuid() == 0 {
		wantOwner = "root" // which, as root, root's entry names first
	}
	if e.Path != filepath.Join(ws, "dir/a.txt") || e.Size != int64(len(big)) || e.Mode != 0o600 || e.Type != agentv1.FileType_FILE_TYPE_FILE || e.Owner != wantOwner {
		t.Fatalf("write entry: %v", e)
	}
	info, data, err := read(t, c, "dir/a.txt")
	if err != nil || !bytes.Equal(data, big) || info.Size != int64(len(big)) {
		t.Fatalf("read back: %d bytes, %v, %v", len(data), info, err)
	}
	st, err := c.Stat(ctx, connect.NewRequest(&agentv1.StatRequest{Path: filepath.Join(ws, "dir")}))
	if err != nil || st.Msg.Entry.Type != agentv1.FileType_FILE_TYPE_DIRECTORY || st.Msg.Entry.Mode != 0o755 {
		t.Fatalf("stat dir: %v %v", st, err)
	}
	if err := os.Symlink("a.txt", filepath.Join(ws, "dir/link")); err != nil {
		t.Fatal(err)
	}
	ls, err := c.ListDir(ctx, connect.NewRequest(&agentv1.ListDirRequest{Path: ""}))
	if err != nil || len(ls.Msg.Entries) != 1 {
		t.Fatalf("list depth 1: %v %v", ls, err)
	}
	ls, err = c.ListDir(ctx, connect.NewRequest(&agentv1.ListDirRequest{Depth: 2}))
	if err != nil || len(ls.Msg.Entries) != 3 {
		t.Fatalf("list depth 2: %v %v", ls, err)
	}
	for _, e := range ls.Msg.Entries {
		if e.Name == "link" && (e.Type != agentv1.FileType_FILE_TYPE_SYMLINK || e.SymlinkTarget != "a.txt") {
			t.Fatalf("symlink entry: %v", e)
		}
	}
	mv, err := c.Move(ctx, connect.NewRequest(&agentv1.MoveRequest{Source: "dir/a.txt", Destination: "b.txt"}))
	if err != nil || mv.Msg.Entry.Path != filepath.Join(ws, "b.txt") {
		t.Fatalf("move: %v %v", mv, err)
	}
	_, err = c.Stat(ctx, connect.NewRequest(&agentv1.StatRequest{Path: "dir/a.txt"}))
	wantCode(t, "stat moved-away file", err, connect.CodeNotFound)
	if _, err := c.Remove(ctx, connect.NewRequest(&agentv1.RemoveRequest{Path: "dir"})); err != nil {
		t.Fatal(err)
	}
	_, err = c.Remove(ctx, connect.NewRequest(&agentv1.RemoveRequest{Path: "dir"}))
	wantCode(t, "remove twice", err, connect.CodeNotFound)
	// Overwrite replaces content atomically and leaves no temp file behind.
	if _, err := write(t, c, &agentv1.WriteFileHeader{Path: "b.txt"}, []byte("short")); err != nil {
		t.Fatal(err)
	}
	if _, data, _ := read(t, c, "b.txt"); string(data) != "short" {
		t.Fatalf("overwrite: %q", data)
	}
	ents, _ := os.ReadDir(ws)
	if len(ents) != 1 {
		t.Fatalf("workspace holds %d entries, want only b.txt", len(ents))
	}
	// An empty write makes an empty file.
	if e, err := write(t, c, &agentv1.WriteFileHeader{Path: "empty"}); err != nil || e.Size != 0 {
		t.Fatalf("empty write: %v %v", e, err)
	}
}

func TestMakeDir(t *testing.T) {
	c, ws := newClient(t)
	ctx := context.Background()
	r, err := c.MakeDir(ctx, connect.NewRequest(&agentv1.MakeDirRequest{Path: "x/y/z", Mode: 0o700}))
	if err != nil || !r.Msg.Created || r.Msg.Entry.Mode != 0o700 {
		t.Fatalf("mkdir -p: %v %v", r, err)
	}
	if fi, err := os.Stat(filepath.Join(ws, "x")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("parent: %v %v", fi, err)
	}
	r, err = c.MakeDir(ctx, connect.NewRequest(&agentv1.MakeDirRequest{Path: "x/y/z"}))
	if err != nil || r.Msg.Created {
		t.Fatalf("mkdir existing: %v %v", r, err)
	}
	if err := os.WriteFile(filepath.Join(ws, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = c.MakeDir(ctx, connect.NewRequest(&agentv1.MakeDirRequest{Path: "f"}))
	wantCode(t, "mkdir over a file", err, connect.CodeAlreadyExists)
	_, err = c.MakeDir(ctx, connect.NewRequest(&agentv1.MakeDirRequest{Path: "f/sub"}))
	wantCode(t, "mkdir under a file", err, connect.CodeFailedPrecondition)
}

func TestErrors(t *testing.T) {
	c, ws := newClient(t)
	ctx := context.Background()
	_, _, err := read(t, c, "missing")
	wantCode(t, "read missing", err, connect.CodeNotFound)
	_, _, err = read(t, c, ws)
	wantCode(t, "read a directory", err, connect.CodeFailedPrecondition)
	_, err = write(t, c, &agentv1.WriteFileHeader{Path: "no/parent"}, []byte("x"))
	wantCode(t, "write without parents", err, connect.CodeNotFound)
	_, err = write(t, c, &agentv1.WriteFileHeader{Path: ""}, []byte("x"))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("write empty path: %v", err)
	}
	if err := os.WriteFile(filepath.Join(ws, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = c.ListDir(ctx, connect.NewRequest(&agentv1.ListDirRequest{Path: "file"}))
	wantCode(t, "list a file", err, connect.CodeFailedPrecondition)
	_, err = write(t, c, &agentv1.WriteFileHeader{Path: "file/child"}, []byte("x"))
	wantCode(t, "write under a file", err, connect.CodeFailedPrecondition)
	_, err = c.Move(ctx, connect.NewRequest(&agentv1.MoveRequest{Source: "nope", Destination: "other"}))
	wantCode(t, "move missing", err, connect.CodeNotFound)
	_, err = c.Remove(ctx, connect.NewRequest(&agentv1.RemoveRequest{Path: "/"}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("remove /: %v", err)
	}
	_, err = write(t, c, &agentv1.WriteFileHeader{Path: "x", User: "nobody-at-all"}, []byte("x"))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("unknown owner: %v", err)
	}
}

func TestModeBits(t *testing.T) {
	for _, b := range []uint32{0o644, 0o4755, 0o2750, 0o1777} {
		if got := modeBits(goMode(b)); got != b {
			t.Fatalf("mode %o round-trips to %o", b, got)
		}
	}
}
