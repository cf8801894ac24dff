package envdfs

import (
	"bytes"
	"errors"
	"io"
	"mime/multipart"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warrenhq/warren/agent/internal/users"
)

// A path from a request resolves to an absolute, clean path without NUL
// bytes, or is refused; it never panics.
func FuzzCallerResolve(f *testing.F) {
	for _, s := range []string{"", "~", "~/x", "~root", "rel/a", "/abs/../../..", "a\x00b", "~/../../etc", strings.Repeat("a/", 3000), "\\x", "/././/"} {
		f.Add(s)
	}
	c := caller{User: users.User{Name: "user", UID: 1000, GID: 1000, Home: "/home/user"}}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := c.resolve(p)
		if err != nil {
			return
		}
		if !filepath.IsAbs(got) || filepath.Clean(got) != got || strings.IndexByte(got, 0) >= 0 {
			t.Fatalf("resolve(%q) = %q", p, got)
		}
	})
}

// The multipart side of an upload: every part's destination comes out of
// the parser, fullFileName and resolve as an absolute clean path or as an
// error — never a panic. Nothing is written.
func FuzzUploadNames(f *testing.F) {
	const boundary = "b0undary"
	part := func(disposition, body string) string {
		return "--" + boundary + "\r\nContent-Disposition: " + disposition + "\r\n\r\n" + body + "\r\n"
	}
	f.Add(part(`form-data; name="file"; filename="a/b.txt"`, "x") + "--" + boundary + "--\r\n")
	f.Add(part(`form-data; name="file"; filename="../../etc/passwd"`, "x") + "--" + boundary + "--\r\n")
	f.Add(part(`form-data; name="file"; filename*=UTF-8''%2e%2e%2fx`, "x") + "--" + boundary + "--\r\n")
	f.Add(part(`form-data; name="file"`, "no name") + "--" + boundary + "--\r\n")
	f.Add(part(`garbage;;;=`, "") + "--" + boundary)
	f.Add("")
	c := caller{User: users.User{Name: "user", UID: 1000, GID: 1000, Home: "/home/user"}}
	f.Fuzz(func(t *testing.T, body string) {
		mr := multipart.NewReader(bytes.NewReader([]byte(body)), boundary)
		for i := 0; i < 100; i++ {
			p, err := mr.NextPart()
			if errors.Is(err, io.EOF) || err != nil {
				return
			}
			if p.FormName() == "file" {
				if name, err := fullFileName(p); err == nil {
					if got, err := c.resolve(name); err == nil && (!filepath.IsAbs(got) || filepath.Clean(got) != got) {
						t.Fatalf("part named %q resolves to %q", name, got)
					}
				}
			}
			_, _ = io.Copy(io.Discard, p)
			p.Close()
		}
	})
}
