package agentconn

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
	"github.com/warrenhq/warren/internal/testutil"
)

func TestFiles(t *testing.T) {
	testutil.RequireRoot(t)
	c, _, ws := setup(t)
	fc := c.Files()
	ctx := context.Background()

	content := bytes.Repeat([]byte("warren "), 500000) // 3.5 MB: several chunks each way
	ws2 := fc.WriteFile(ctx)
	if err := ws2.Send(&agentv1.WriteFileRequest{Header: &agentv1.WriteFileHeader{Path: "a/b/file.txt", MakeParents: true}}); err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(content); off += 1 << 20 {
		if err := ws2.Send(&agentv1.WriteFileRequest{Data: content[off:min(off+1<<20, len(content))]}); err != nil {
			t.Fatal(err)
		}
	}
	wr, err := ws2.CloseAndReceive()
	if err != nil {
		t.Fatal(err)
	}
	if wr.Msg.Entry.Size != int64(len(content)) || wr.Msg.Entry.Path != filepath.Join(ws, "a/b/file.txt") || wr.Msg.Entry.Mode != 0o644 {
		t.Fatalf("write: %v", wr.Msg.Entry)
	}

	rs, err := fc.ReadFile(ctx, connect.NewRequest(&agentv1.ReadFileRequest{Path: "a/b/file.txt"}))
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	var info *agentv1.EntryInfo
	for rs.Receive() {
		if rs.Msg().Info != nil {
			info = rs.Msg().Info
		}
		got.Write(rs.Msg().Data)
	}
	if err := rs.Err(); err != nil || info == nil || !bytes.Equal(got.Bytes(), content) {
		t.Fatalf("read: %d bytes, info %v, %v", got.Len(), info, err)
	}
	rs.Close()

	st, err := fc.Stat(ctx, connect.NewRequest(&agentv1.StatRequest{Path: "a/b"}))
	if err != nil || st.Msg.Entry.Type != agentv1.FileType_FILE_TYPE_DIRECTORY {
		t.Fatalf("stat: %v %v", st, err)
	}
	ls, err := fc.ListDir(ctx, connect.NewRequest(&agentv1.ListDirRequest{Path: "a", Depth: 2}))
	if err != nil || len(ls.Msg.Entries) != 2 {
		t.Fatalf("list: %v %v", ls, err)
	}
	if _, err := fc.Move(ctx, connect.NewRequest(&agentv1.MoveRequest{Source: "a/b/file.txt", Destination: "moved.txt"})); err != nil {
		t.Fatal(err)
	}
	mk, err := fc.MakeDir(ctx, connect.NewRequest(&agentv1.MakeDirRequest{Path: "p/q/r"}))
	if err != nil || !mk.Msg.Created {
		t.Fatalf("mkdir parents: %v %v", mk, err)
	}
	if _, err := fc.Remove(ctx, connect.NewRequest(&agentv1.RemoveRequest{Path: "a"})); err != nil {
		t.Fatal(err)
	}
	_, err = fc.Stat(ctx, connect.NewRequest(&agentv1.StatRequest{Path: "a"}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("stat removed: %v", err)
	}
	rs, err = fc.ReadFile(ctx, connect.NewRequest(&agentv1.ReadFileRequest{Path: "missing"}))
	if err == nil {
		for rs.Receive() {
		}
		err = rs.Err()
		rs.Close()
	}
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("read missing: %v", err)
	}
}
