package process

import (
	"regexp"
	"strings"
	"testing"
)

func TestValidTagMatchesTheDocumentedPattern(t *testing.T) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)
	for _, tag := range []string{
		"", "a", "web-server_1.2", strings.Repeat("x", 128), strings.Repeat("x", 129),
		"has space", "slash/", "ünï", "tab\t", "new\nline", "ok.", "-", "日本",
	} {
		if got, want := validTag(tag), pattern.MatchString(tag); got != want {
			t.Errorf("validTag(%q) = %v, want %v", tag, got, want)
		}
	}
}
