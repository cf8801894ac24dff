package files

import (
	"path/filepath"
	"strings"
	"testing"
)

// A path from the daemon resolves to an absolute, clean path without NUL
// bytes, relative ones under the workspace; or it is refused. Never a
// panic.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"", "a", "/abs", "../../..", "a/../../b", "a\x00", strings.Repeat("x", 5000), "./.", "//x//y/"} {
		f.Add(s)
	}
	s := &Service{cfg: Config{Workspace: "/workspace"}}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := s.resolve(p)
		if err != nil {
			return
		}
		if !filepath.IsAbs(got) || filepath.Clean(got) != got || strings.IndexByte(got, 0) >= 0 {
			t.Fatalf("resolve(%q) = %q", p, got)
		}
		if !filepath.IsAbs(p) && !strings.HasPrefix(p, "..") && !strings.Contains(p, "/..") && !strings.HasPrefix(got, "/workspace") {
			t.Fatalf("relative %q left the workspace: %q", p, got)
		}
	})
}
