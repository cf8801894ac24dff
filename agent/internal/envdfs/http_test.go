package envdfs

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	fspb "github.com/warrenhq/warren/api/gen/filesystem"
)

func TestHealth(t *testing.T) {
	e := newEnv(t)
	resp, err := e.hc.Get(e.url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("health: %d", resp.StatusCode)
	}
}

func TestUploadMultipart(t *testing.T) {
	e := newEnv(t)
	abs := filepath.Join(e.base, "abs", "deep", "b.txt")
	got := e.upload(t, "", nil,
		[2]string{"dir1/sub/a.txt", "first"},
		[2]string{abs, "second"},
		[2]string{"top.txt", ""})
	want := uploaded{
		{Path: filepath.Join(e.home, "dir1/sub/a.txt"), Name: "a.txt", Type: "file"},
		{Path: abs, Name: "b.txt", Type: "file"},
		{Path: filepath.Join(e.home, "top.txt"), Name: "top.txt", Type: "file"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("answer %+v, want %+v", got, want)
	}
	for p, content := range map[string]string{want[0].Path: "first", abs: "second", want[2].Path: ""} {
		b, err := os.ReadFile(p)
		if err != nil || string(b) != content {
			t.Fatalf("%s: %q %v", p, b, err)
		}
		fi, _ := os.Stat(p)
		if fi.Mode().Perm() != 0o644 {
			t.Fatalf("%s has mode %v", p, fi.Mode())
		}
		wantOwner(t, p, userUID)
	}
	// Created parents are the caller's; existing ones keep their owner.
	for _, d := range []string{"dir1", "dir1/sub"} {
		wantOwner(t, filepath.Join(e.home, d), userUID)
	}
	wantOwner(t, filepath.Join(e.base, "abs"), userUID)
	wantOwner(t, e.base, 0)

	// A path query names the destination of a single part.
	got = e.upload(t, q("path", "override.txt"), nil, [2]string{"ignored/name.txt", "x"})
	if len(got) != 1 || got[0].Path != filepath.Join(e.home, "override.txt") {
		t.Fatalf("path query: %+v", got)
	}
	if _, err := os.Stat(filepath.Join(e.home, "ignored")); !os.IsNotExist(err) {
		t.Fatal("the part filename was used despite the path query")
	}

	// As root (username query), relative paths are in root's home.
	got = e.upload(t, q("username", "root"), nil, [2]string{"r.txt", "r"})
	if got[0].Path != filepath.Join(e.rootHome, "r.txt") {
		t.Fatalf("root upload: %+v", got)
	}
	wantOwner(t, got[0].Path, 0)
}

func TestUploadOctetStreamGzip(t *testing.T) {
	e := newEnv(t)
	var zbuf bytes.Buffer
	zw := gzip.NewWriter(&zbuf)
	content := strings.Repeat("compressible ", 1000)
	zw.Write([]byte(content))
	zw.Close()
	hdr := http.Header{"Content-Type": {"application/octet-stream"}, "Content-Encoding": {"gzip"}}
	resp, body := e.httpDo(t, http.MethodPost, q("path", "z/stream.txt"), hdr, bytes.NewReader(zbuf.Bytes()))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("octet-stream: %d %s", resp.StatusCode, body)
	}
	var got uploaded
	if err := json.Unmarshal(body, &got); err != nil || len(got) != 1 || got[0].Path != filepath.Join(e.home, "z/stream.txt") || got[0].Type != "file" {
		t.Fatalf("answer %s: %v", body, err)
	}
	if b, _ := os.ReadFile(got[0].Path); string(b) != content {
		t.Fatalf("content %d bytes", len(b))
	}
	wantOwner(t, got[0].Path, userUID)

	// A gzip multipart body too.
	ct, mp := multipartBody(t, [2]string{"zm.txt", "zipped part"})
	zbuf.Reset()
	zw = gzip.NewWriter(&zbuf)
	zw.Write(mp)
	zw.Close()
	resp, body = e.httpDo(t, http.MethodPost, "", http.Header{"Content-Type": {ct}, "Content-Encoding": {"gzip"}}, &zbuf)
	if b, _ := os.ReadFile(filepath.Join(e.home, "zm.txt")); resp.StatusCode != 200 || string(b) != "zipped part" {
		t.Fatalf("gzip multipart: %d %s %q", resp.StatusCode, body, b)
	}

	resp, body = e.httpDo(t, http.MethodPost, "", http.Header{"Content-Type": {"application/octet-stream"}}, strings.NewReader("x"))
	wantHTTPError(t, "octet-stream without path", resp, body, http.StatusBadRequest)
	resp, body = e.httpDo(t, http.MethodPost, q("path", "x"), http.Header{"Content-Type": {"text/plain"}}, strings.NewReader("x"))
	wantHTTPError(t, "unsupported content type", resp, body, http.StatusBadRequest)
	resp, body = e.httpDo(t, http.MethodPost, q("path", "x"), http.Header{"Content-Type": {"application/octet-stream"}, "Content-Encoding": {"br"}}, strings.NewReader("x"))
	wantHTTPError(t, "unsupported encoding", resp, body, http.StatusBadRequest)
}

// A failed upload leaves neither a half file nor a temporary one, and an
// existing file keeps its old content.
func TestUploadFailureLeavesNothing(t *testing.T) {
	e := newEnv(t)
	writeFixture(t, filepath.Join(e.home, "keep.txt"), "old", userUID)

	// A multipart body cut in the middle of a part.
	cut := "--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"half.txt\"\r\n\r\nhello, this stops"
	resp, body := e.httpDo(t, http.MethodPost, "", http.Header{"Content-Type": {"multipart/form-data; boundary=B"}}, strings.NewReader(cut))
	wantHTTPError(t, "cut multipart", resp, body, http.StatusBadRequest)
	// A corrupt gzip stream over an existing file.
	var zbuf bytes.Buffer
	zw := gzip.NewWriter(&zbuf)
	zw.Write(bytes.Repeat([]byte("new content "), 1000))
	zw.Close()
	trunc := zbuf.Bytes()[:zbuf.Len()/2]
	resp, body = e.httpDo(t, http.MethodPost, q("path", "keep.txt"), http.Header{"Content-Type": {"application/octet-stream"}, "Content-Encoding": {"gzip"}}, bytes.NewReader(trunc))
	wantHTTPError(t, "truncated gzip", resp, body, http.StatusBadRequest)
	// Into a directory that does not exist yet: the directory goes too.
	resp, body = e.httpDo(t, http.MethodPost, q("path", "newdir/f.txt"), http.Header{"Content-Type": {"application/octet-stream"}, "Content-Encoding": {"gzip"}}, bytes.NewReader(trunc))
	wantHTTPError(t, "truncated gzip into a new directory", resp, body, http.StatusBadRequest)

	ents, err := os.ReadDir(e.home)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "keep.txt" {
		t.Fatalf("home holds %v, want only keep.txt", ents)
	}
	if b, _ := os.ReadFile(filepath.Join(e.home, "keep.txt")); string(b) != "old" {
		t.Fatalf("failed overwrite changed the file: %q", b)
	}
}

func TestUploadErrors(t *testing.T) {
	e := newEnv(t)
	if err := os.Mkdir(filepath.Join(e.home, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFixture(t, filepath.Join(e.home, "afile"), "x", userUID)
	for what, tc := range map[string]struct {
		query string
		files [][2]string
		hdr   http.Header
		code  int
	}{
		"onto a directory":         {files: [][2]string{{"adir", "x"}}, code: 400},
		"under a file":             {files: [][2]string{{"afile/child", "x"}}, code: 400},
		"NUL in the filename":      {files: [][2]string{{"a\x00b", "x"}}, code: 400},
		"NUL in the path query":    {query: "path=a%00b", files: [][2]string{{"n", "x"}}, code: 400},
		"no filename":              {files: [][2]string{{"", "x"}}, code: 400},
		"twice the same path":      {files: [][2]string{{"dup", "1"}, {"./dup", "2"}}, code: 400},
		"unknown user":             {query: "username=nosuch", files: [][2]string{{"u", "x"}}, code: 401},
		"metadata not ASCII":       {files: [][2]string{{"m", "x"}}, hdr: http.Header{"X-Metadata-Bad": {"tab\there"}}, code: 400},
		"metadata too large":       {files: [][2]string{{"m", "x"}}, hdr: http.Header{"X-Metadata-Big": {strings.Repeat("v", 5000)}}, code: 400},
		"no file part at all":      {files: nil, code: 400},
		"another user's ~ in path": {query: "path=~nobody/x", files: [][2]string{{"n", "x"}}, code: 400},
	} {
		ct, body := multipartBody(t, tc.files...)
		hdr := http.Header{"Content-Type": {ct}}
		for k, v := range tc.hdr {
			hdr[k] = v
		}
		resp, b := e.httpDo(t, http.MethodPost, tc.query, hdr, bytes.NewReader(body))
		wantHTTPError(t, what, resp, b, tc.code)
	}
	if b, _ := os.ReadFile(filepath.Join(e.home, "dup")); string(b) != "1" {
		t.Fatalf("the first of two parts to one path: %q", b)
	}
}

// An upload over an existing file keeps its mode and, as envd does, gives
// it to the uploader.
func TestUploadOverwrite(t *testing.T) {
	e := newEnv(t)
	p := filepath.Join(e.home, "theirs.txt")
	writeFixture(t, p, "nobody's", nobodyUID)
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	e.upload(t, "", nil, [2]string{"theirs.txt", "mine now"})
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode after overwrite: %v %v", fi.Mode(), err)
	}
	wantOwner(t, p, userUID)
	// Through a symlink the target is written and the link stays.
	if err := os.Symlink("theirs.txt", filepath.Join(e.home, "link")); err != nil {
		t.Fatal(err)
	}
	e.upload(t, "", nil, [2]string{"link", "via link"})
	if fi, err := os.Lstat(filepath.Join(e.home, "link")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("link replaced: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(p); string(b) != "via link" {
		t.Fatalf("target holds %q", b)
	}
}

func TestMetadata(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	md := map[string]string{"author": "mish", "purpose": "upload"}
	hdr := http.Header{"X-Metadata-Author": {"mish"}, "x-metadata-purpose": {"upload"}}
	got := e.upload(t, "", hdr, [2]string{"dir/with_md.txt", "content"})
	if !reflect.DeepEqual(got[0].Metadata, md) {
		t.Fatalf("upload answer metadata %v", got[0].Metadata)
	}
	// Octet-stream uploads carry it too.
	resp, body := e.httpDo(t, http.MethodPost, q("path", "octet_md.txt"),
		http.Header{"Content-Type": {"application/octet-stream"}, "X-Metadata-Author": {"mish"}, "X-Metadata-Purpose": {"upload"}}, strings.NewReader("x"))
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"metadata":{"author":"mish","purpose":"upload"}`) {
		t.Fatalf("octet-stream metadata: %d %s", resp.StatusCode, body)
	}
	for _, p := range []string{"dir/with_md.txt", "octet_md.txt"} {
		st, err := e.fs.Stat(ctx, req(&fspb.StatRequest{Path: p}, ""))
		if err != nil || !reflect.DeepEqual(st.Msg.Entry.Metadata, md) {
			t.Fatalf("stat %s metadata: %v %v", p, st, err)
		}
	}
	ls, err := e.fs.ListDir(ctx, req(&fspb.ListDirRequest{Path: "dir"}, ""))
	if err != nil || len(ls.Msg.Entries) != 1 || !reflect.DeepEqual(ls.Msg.Entries[0].Metadata, md) {
		t.Fatalf("list metadata: %v %v", ls, err)
	}
	mv, err := e.fs.Move(ctx, req(&fspb.MoveRequest{Source: "dir/with_md.txt", Destination: "renamed.txt"}, ""))
	if err != nil || !reflect.DeepEqual(mv.Msg.Entry.Metadata, md) {
		t.Fatalf("metadata after rename: %v %v", mv, err)
	}
	// Overwriting without metadata clears it.
	got = e.upload(t, "", nil, [2]string{"renamed.txt", "second"})
	st, err := e.fs.Stat(ctx, req(&fspb.StatRequest{Path: "renamed.txt"}, ""))
	if got[0].Metadata != nil || err != nil || st.Msg.Entry.Metadata != nil {
		t.Fatalf("stale metadata: %v / %v %v", got[0].Metadata, st, err)
	}
	// The answer omits metadata when there is none, as envd's does.
	resp, body = e.httpDo(t, http.MethodPost, q("path", "plain.txt"), http.Header{"Content-Type": {"application/octet-stream"}}, strings.NewReader("x"))
	if resp.StatusCode != 200 || strings.Contains(string(body), "metadata") {
		t.Fatalf("answer without metadata: %s", body)
	}
	// Metadata set inside the sandbox (setfattr) in envd's namespace shows;
	// other namespaces and values that are not UTF-8 do not.
	plain := filepath.Join(e.home, "plain.txt")
	for name, v := range map[string]string{"user.e2b.origin": "shell", "user.other": "x", "user.e2b.bin": "\xff\xfe"} {
		if err := unix.Setxattr(plain, name, []byte(v), 0); err != nil {
			t.Fatal(err)
		}
	}
	st, err = e.fs.Stat(ctx, req(&fspb.StatRequest{Path: "plain.txt"}, ""))
	if err != nil || !reflect.DeepEqual(st.Msg.Entry.Metadata, map[string]string{"origin": "shell"}) {
		t.Fatalf("xattrs set in the sandbox: %v %v", st, err)
	}
}

func TestDownload(t *testing.T) {
	e := newEnv(t)
	content := strings.Repeat("line of text\n", 500)
	writeFixture(t, filepath.Join(e.home, "dir/a.txt"), content, userUID)
	writeFixture(t, filepath.Join(e.home, "noext"), "%PDF-1.4 not really", userUID)
	writeFixture(t, filepath.Join(e.home, "empty"), "", userUID)
	writeFixture(t, filepath.Join(e.home, "my file.bin"), "\x00\x01", userUID)

	resp, body := e.httpDo(t, http.MethodGet, q("path", "dir/a.txt"), nil, nil)
	if resp.StatusCode != 200 || string(body) != content {
		t.Fatalf("download: %d %d bytes", resp.StatusCode, len(body))
	}
	for k, want := range map[string]string{
		"Content-Type":        "text/plain; charset=utf-8",
		"Content-Disposition": "inline; filename=a.txt",
		"Content-Length":      "6500",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Fatalf("%s: %q, want %q", k, got, want)
		}
	}
	resp, body = e.httpDo(t, http.MethodGet, q("path", filepath.Join(e.home, "noext")), nil, nil)
	if resp.Header.Get("Content-Type") != "application/pdf" || string(body) != "%PDF-1.4 not really" {
		t.Fatalf("sniffed: %q %q", resp.Header.Get("Content-Type"), body)
	}
	resp, body = e.httpDo(t, http.MethodGet, q("path", "empty"), nil, nil)
	if resp.StatusCode != 200 || len(body) != 0 || resp.Header.Get("Content-Length") != "0" {
		t.Fatalf("empty file: %d %q %q", resp.StatusCode, body, resp.Header.Get("Content-Length"))
	}
	resp, _ = e.httpDo(t, http.MethodGet, q("path", "my file.bin"), nil, nil)
	if got := resp.Header.Get("Content-Disposition"); got != `inline; filename="my file.bin"` {
		t.Fatalf("quoted filename: %q", got)
	}
	// A file that only root can read is still served: like envd, the agent reads as root.
	writeFixture(t, filepath.Join(e.rootHome, "secret"), "s", 0)
	resp, body = e.httpDo(t, http.MethodGet, q("path", "secret", "username", "root"), nil, nil)
	if resp.StatusCode != 200 || string(body) != "s" {
		t.Fatalf("root's relative path: %d %s", resp.StatusCode, body)
	}

	// gzip when accepted.
	resp, body = e.httpDo(t, http.MethodGet, q("path", "dir/a.txt"), http.Header{"Accept-Encoding": {"gzip, deflate"}}, nil)
	if resp.Header.Get("Content-Encoding") != "gzip" || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("gzip headers: %v", resp.Header)
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if plain, err := io.ReadAll(zr); err != nil || string(plain) != content {
		t.Fatalf("gzip body: %d bytes, %v", len(plain), err)
	}
	resp, _ = e.httpDo(t, http.MethodGet, q("path", "dir/a.txt"), http.Header{"Accept-Encoding": {"gzip;q=0.5, identity"}}, nil)
	if resp.Header.Get("Content-Encoding") != "" {
		t.Fatal("gzip chosen over a preferred identity")
	}

	resp, body = e.httpDo(t, http.MethodGet, q("path", "missing.txt"), nil, nil)
	wantHTTPError(t, "missing file", resp, body, http.StatusNotFound)
	resp, body = e.httpDo(t, http.MethodGet, q("path", "dir"), nil, nil)
	wantHTTPError(t, "a directory", resp, body, http.StatusBadRequest)
	resp, body = e.httpDo(t, http.MethodGet, "path=a%00b", nil, nil)
	wantHTTPError(t, "NUL in the path", resp, body, http.StatusBadRequest)
	resp, body = e.httpDo(t, http.MethodGet, q("path", "dir/a.txt", "username", "nosuch"), nil, nil)
	wantHTTPError(t, "unknown user", resp, body, http.StatusUnauthorized)
	resp, body = e.httpDo(t, http.MethodGet, q("path", "dir/a.txt"), http.Header{"Accept-Encoding": {"br, identity;q=0"}}, nil)
	wantHTTPError(t, "no acceptable encoding", resp, body, http.StatusBadRequest)
	// Signed-URL parameters are the daemon's business and are ignored here.
	resp, body = e.httpDo(t, http.MethodGet, q("path", "dir/a.txt", "signature", "v1_x", "signature_expiration", "1"), nil, nil)
	if resp.StatusCode != 200 || string(body) != content {
		t.Fatalf("with signature params: %d", resp.StatusCode)
	}
}

func TestAcceptsGzip(t *testing.T) {
	for h, want := range map[string][2]bool{
		"":                        {false, true},
		"gzip":                    {true, true},
		"gzip, deflate, br":       {true, true},
		"GZIP;q=0.8":              {true, true},
		"deflate":                 {false, true},
		"gzip;q=0":                {false, true},
		"gzip;q=0.5, identity":    {false, true},
		"*":                       {false, true},
		"identity;q=0, *":         {true, true},
		"identity;q=0":            {false, false},
		"*;q=0":                   {false, false},
		"*;q=0, gzip":             {true, true},
		"identity;q=0.1, gzip":    {true, true},
		"br, identity;q=0, *;q=0": {false, false},
	} {
		g, ok := acceptsGzip(h)
		if [2]bool{g, ok} != want {
			t.Errorf("%q: gzip=%v ok=%v, want %v", h, g, ok, want)
		}
	}
}

// A full disk answers 507, which the SDKs turn into NotEnoughSpaceError,
// and leaves nothing behind.
func TestUploadDiskFull(t *testing.T) {
	e := newEnv(t)
	mnt := filepath.Join(e.home, "small")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount a small tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", mnt, err, out)
		}
	})
	big := bytes.Repeat([]byte("x"), 1<<20)
	resp, body := e.httpDo(t, http.MethodPost, q("path", "small/big.bin"), http.Header{"Content-Type": {"application/octet-stream"}}, bytes.NewReader(big))
	wantHTTPError(t, "disk full", resp, body, http.StatusInsufficientStorage)
	if ents, _ := os.ReadDir(mnt); len(ents) != 0 {
		t.Fatalf("full disk holds %v", ents)
	}
}
