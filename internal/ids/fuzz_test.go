package ids

import (
	"strings"
	"testing"
)

// Whatever Validate or ValidateName accepts is safe as a path component,
// a cgroup name and a host name: no separator, no dot-dot, no NUL, no
// space, bounded; and accepting is stable.
func FuzzValidate(f *testing.F) {
	for _, s := range []string{"abc123", "", "..", ".", "a/b", "a\x00b", "A", "a b", "x.y", "a-b_c.d",
		strings.Repeat("a", MaxLen), strings.Repeat("a", MaxLen+1), "é", "../etc", "-a", "a\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for name, check := range map[string]func(string, string) error{"Validate": Validate, "ValidateName": ValidateName} {
			if check("id", s) != nil {
				continue
			}
			if s == "" || len(s) > MaxLen || s == "." || s == ".." || strings.ContainsAny(s, "/\x00 \t\n\\") || strings.HasPrefix(s, "-") || strings.HasPrefix(s, ".") {
				t.Fatalf("%s accepted %q", name, s)
			}
			for _, r := range s {
				if r > 0x7e {
					t.Fatalf("%s accepted non-ASCII %q", name, s)
				}
			}
			if check("id", s) != nil {
				t.Fatalf("%s is not stable on %q", name, s)
			}
		}
	})
}
