package envdfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	fspb "github.com/warrenhq/warren/api/gen/filesystem"
)

func TestMakeDirStatList(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)

	// The structure of the E2B SDK's own list test.
	for _, d := range []string{"test_directory", "test_directory/subdir1", "test_directory/subdir2",
		"test_directory/subdir1/subdir1_1", "test_directory/subdir1/subdir1_2",
		"test_directory/subdir2/subdir2_1", "test_directory/subdir2/subdir2_2"} {
		r, err := e.fs.MakeDir(ctx, req(&fspb.MakeDirRequest{Path: d}, ""))
		if err != nil {
			t.Fatalf("make %s: %v", d, err)
		}
		en := r.Msg.Entry
		if en.Path != filepath.Join(e.home, d) || en.Type != fspb.FileType_FILE_TYPE_DIRECTORY || en.Mode != 0o755 ||
			en.Permissions != "drwxr-xr-x" || en.Owner != "user" || en.Group != "user" {
			t.Fatalf("make %s: entry %v", d, en)
		}
	}
	writeFixture(t, filepath.Join(e.home, "test_directory/file1.txt"), "Hello, world!", userUID)

	_, err := e.fs.MakeDir(ctx, req(&fspb.MakeDirRequest{Path: "test_directory"}, ""))
	wantCode(t, "make an existing directory", err, connect.CodeAlreadyExists)
	_, err = e.fs.MakeDir(ctx, req(&fspb.MakeDirRequest{Path: "test_directory/file1.txt"}, ""))
	wantCode(t, "make a directory over a file", err, connect.CodeInvalidArgument)
	_, err = e.fs.MakeDir(ctx, req(&fspb.MakeDirRequest{Path: "test_directory/file1.txt/sub"}, ""))
	wantCode(t, "make a directory under a file", err, connect.CodeFailedPrecondition)
	_, err = e.fs.MakeDir(ctx, req(&fspb.MakeDirRequest{Path: ""}, ""))
	wantCode(t, "make an empty path", err, connect.CodeInvalidArgument)

	// mkdir -p: every created parent belongs to the caller.
	if _, err := e.fs.MakeDir(ctx, req(&fspb.MakeDirRequest{Path: "x/y/z"}, "")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"x", "x/y", "x/y/z"} {
		wantOwner(t, filepath.Join(e.home, d), userUID)
	}

	for _, tc := range []struct {
		depth uint32
		want  string
	}{
		{0, "file1.txt,subdir1,subdir2"},
		{1, "file1.txt,subdir1,subdir2"},
		{2, "file1.txt,subdir1,subdir1_1,subdir1_2,subdir2,subdir2_1,subdir2_2"},
		{3, "file1.txt,subdir1,subdir1_1,subdir1_2,subdir2,subdir2_1,subdir2_2"},
	} {
		r, err := e.fs.ListDir(ctx, req(&fspb.ListDirRequest{Path: "test_directory", Depth: tc.depth}, ""))
		if err != nil {
			t.Fatal(err)
		}
		if got := names(r.Msg.Entries); got != tc.want {
			t.Fatalf("depth %d: %s, want %s", tc.depth, got, tc.want)
		}
		if tc.depth == 2 && r.Msg.Entries[2].Path != filepath.Join(e.home, "test_directory/subdir1/subdir1_1") {
			t.Fatalf("nested entry path %s", r.Msg.Entries[2].Path)
		}
	}

	st, err := e.fs.Stat(ctx, req(&fspb.StatRequest{Path: "test_directory/file1.txt"}, ""))
	if err != nil {
		t.Fatal(err)
	}
	f := st.Msg.Entry
	if f.Name != "file1.txt" || f.Type != fspb.FileType_FILE_TYPE_FILE || f.Path != filepath.Join(e.home, "test_directory/file1.txt") ||
		f.Size != 13 || f.Mode != 0o644 || f.Permissions != "-rw-r--r--" || f.Owner != "user" || f.Group != "user" ||
		f.ModifiedTime == nil || f.SymlinkTarget != nil || f.Metadata != nil {
		t.Fatalf("stat file: %v", f)
	}
	_, err = e.fs.Stat(ctx, req(&fspb.StatRequest{Path: "missing"}, ""))
	wantCode(t, "stat missing", err, connect.CodeNotFound)
	_, err = e.fs.ListDir(ctx, req(&fspb.ListDirRequest{Path: "missing"}, ""))
	wantCode(t, "list missing", err, connect.CodeNotFound)
	_, err = e.fs.ListDir(ctx, req(&fspb.ListDirRequest{Path: "test_directory/file1.txt"}, ""))
	wantCode(t, "list a file", err, connect.CodeInvalidArgument)

	// Owners the passwd file names, and ids it does not.
	writeFixture(t, filepath.Join(e.home, "nob"), "", nobodyUID)
	writeFixture(t, filepath.Join(e.home, "num"), "", 4242)
	for p, want := range map[string]string{"nob": "nobody/nogroup", "num": "4242/4242", "/": "root/root"} {
		st, err := e.fs.Stat(ctx, req(&fspb.StatRequest{Path: p}, ""))
		if err != nil || st.Msg.Entry.Owner+"/"+st.Msg.Entry.Group != want {
			t.Fatalf("owner of %s: %v %v, want %s", p, st, err, want)
		}
	}
}

func TestSymlinks(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	writeFixture(t, filepath.Join(e.home, "real/file.txt"), "x", userUID)
	for link, target := range map[string]string{"link-file": "real/file.txt", "link-dir": "real", "dangling": "nowhere", "cycle": "cycle"} {
		if err := os.Symlink(target, filepath.Join(e.home, link)); err != nil {
			t.Fatal(err)
		}
	}
	st, err := e.fs.Stat(ctx, req(&fspb.StatRequest{Path: "link-file"}, ""))
	if err != nil {
		t.Fatal(err)
	}
	if en := st.Msg.Entry; en.GetSymlinkTarget() != filepath.Join(e.home, "real/file.txt") || en.Type != fspb.FileType_FILE_TYPE_FILE ||
		!strings.HasPrefix(en.Permissions, "L") || en.Mode != 0o644 || en.Path != filepath.Join(e.home, "link-file") {
		t.Fatalf("symlink to file: %v", en)
	}
	st, err = e.fs.Stat(ctx, req(&fspb.StatRequest{Path: "dangling"}, ""))
	if err != nil || st.Msg.Entry.Type != fspb.FileType_FILE_TYPE_UNSPECIFIED {
		t.Fatalf("dangling symlink: %v %v", st, err)
	}
	// A symlink given as the directory is listed through, keeping its spelling.
	ls, err := e.fs.ListDir(ctx, req(&fspb.ListDirRequest{Path: "link-dir"}, ""))
	if err != nil || len(ls.Msg.Entries) != 1 || ls.Msg.Entries[0].Path != filepath.Join(e.home, "link-dir/file.txt") {
		t.Fatalf("list through a symlink: %v %v", ls, err)
	}
	// Inside a listing links are entries, never descended.
	ls, err = e.fs.ListDir(ctx, req(&fspb.ListDirRequest{Depth: 5}, ""))
	if err != nil || names(ls.Msg.Entries) != "cycle,dangling,link-dir,link-file,real,file.txt" {
		t.Fatalf("list with links: %v %v", ls, err)
	}
	_, err = e.fs.ListDir(ctx, req(&fspb.ListDirRequest{Path: "cycle"}, ""))
	wantCode(t, "list a symlink cycle", err, connect.CodeFailedPrecondition)
}

func TestMoveRemove(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	writeFixture(t, filepath.Join(e.home, "old.txt"), "content", userUID)
	mv, err := e.fs.Move(ctx, req(&fspb.MoveRequest{Source: "old.txt", Destination: "new/dir/new.txt"}, ""))
	if err != nil {
		t.Fatal(err)
	}
	if en := mv.Msg.Entry; en.Name != "new.txt" || en.Path != filepath.Join(e.home, "new/dir/new.txt") || en.Type != fspb.FileType_FILE_TYPE_FILE || en.Size != 7 {
		t.Fatalf("move entry: %v", en)
	}
	wantOwner(t, filepath.Join(e.home, "new"), userUID)
	_, err = e.fs.Stat(ctx, req(&fspb.StatRequest{Path: "old.txt"}, ""))
	wantCode(t, "stat moved-away file", err, connect.CodeNotFound)
	_, err = e.fs.Move(ctx, req(&fspb.MoveRequest{Source: "non_existing_file.txt", Destination: "x"}, ""))
	wantCode(t, "move a missing file", err, connect.CodeNotFound)
	_, err = e.fs.Move(ctx, req(&fspb.MoveRequest{Source: "new", Destination: ""}, ""))
	wantCode(t, "move to an empty path", err, connect.CodeInvalidArgument)

	if _, err := e.fs.Remove(ctx, req(&fspb.RemoveRequest{Path: "new"}, "")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(e.home, "new")); !os.IsNotExist(err) {
		t.Fatalf("tree survived removal: %v", err)
	}
	// Like envd and rm -f, removing what is not there succeeds.
	if _, err := e.fs.Remove(ctx, req(&fspb.RemoveRequest{Path: "non_existing_file.txt"}, "")); err != nil {
		t.Fatalf("remove missing: %v", err)
	}
	_, err = e.fs.Remove(ctx, req(&fspb.RemoveRequest{Path: "/"}, "root"))
	wantCode(t, "remove /", err, connect.CodeInvalidArgument)
	_, err = e.fs.Remove(ctx, req(&fspb.RemoveRequest{Path: "/home/../"}, "root"))
	wantCode(t, "remove / spelled otherwise", err, connect.CodeInvalidArgument)
}

func TestUsersAndBadInput(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	// root's relative paths are in root's home, and what it makes is root's.
	r, err := e.fs.MakeDir(ctx, req(&fspb.MakeDirRequest{Path: "rootdir"}, "root"))
	if err != nil || r.Msg.Entry.Path != filepath.Join(e.rootHome, "rootdir") || r.Msg.Entry.Owner != "root" {
		t.Fatalf("root mkdir: %v %v", r, err)
	}
	wantOwner(t, filepath.Join(e.rootHome, "rootdir"), 0)
	// "~" is the caller's home.
	st, err := e.fs.Stat(ctx, req(&fspb.StatRequest{Path: "~/rootdir"}, "root"))
	if err != nil || st.Msg.Entry.Path != filepath.Join(e.rootHome, "rootdir") {
		t.Fatalf("stat ~/: %v %v", st, err)
	}
	_, err = e.fs.Stat(ctx, req(&fspb.StatRequest{Path: "~nobody/x"}, ""))
	wantCode(t, "another user's ~", err, connect.CodeInvalidArgument)
	_, err = e.fs.Stat(ctx, req(&fspb.StatRequest{Path: "x"}, "nosuchuser"))
	wantCode(t, "unknown user", err, connect.CodeUnauthenticated)
	bad := connect.NewRequest(&fspb.StatRequest{Path: "x"})
	bad.Header().Set("Authorization", "Bearer token")
	_, err = e.fs.Stat(ctx, bad)
	wantCode(t, "malformed Authorization", err, connect.CodeUnauthenticated)

	for what, call := range map[string]func() error{
		"stat":  func() error { _, err := e.fs.Stat(ctx, req(&fspb.StatRequest{Path: "a\x00b"}, "")); return err },
		"list":  func() error { _, err := e.fs.ListDir(ctx, req(&fspb.ListDirRequest{Path: "/tmp\x00"}, "")); return err },
		"mkdir": func() error { _, err := e.fs.MakeDir(ctx, req(&fspb.MakeDirRequest{Path: "d\x00"}, "")); return err },
		"move": func() error {
			_, err := e.fs.Move(ctx, req(&fspb.MoveRequest{Source: "a", Destination: "b\x00"}, ""))
			return err
		},
		"remove": func() error { _, err := e.fs.Remove(ctx, req(&fspb.RemoveRequest{Path: "\x00"}, "")); return err },
		"long": func() error {
			_, err := e.fs.Stat(ctx, req(&fspb.StatRequest{Path: strings.Repeat("a", 5000)}, ""))
			return err
		},
	} {
		wantCode(t, what+" with a bad path", call(), connect.CodeInvalidArgument)
	}
	if _, err := os.Stat(filepath.Join(e.home, "d")); !os.IsNotExist(err) {
		t.Fatalf("a NUL-truncated path was created: %v", err)
	}
}
