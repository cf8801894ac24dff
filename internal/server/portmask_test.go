package server

import (
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
)

// maskRequestHost: ${PORT} becomes the port, everywhere it appears; a mask
// that could split or smuggle a header is refused.
func TestMaskRequestHost(t *testing.T) {
	for mask, want := range map[string]string{
		"":                    "",
		"localhost:${PORT}":   "localhost:8000",
		"${PORT}-app.example": "8000-app.example",
		"example.com":         "example.com",
		"[::1]:${PORT}":       "[::1]:8000",
	} {
		if err := validMaskHost(mask); err != nil {
			t.Errorf("%q refused: %v", mask, err)
		}
		if got := maskedHost(mask, 8000); got != want {
			t.Errorf("maskedHost(%q) = %q, want %q", mask, got, want)
		}
	}
	for _, mask := range []string{"a b", "evil.com\r\nX-Injected: 1", "a/b", "${HOST}", "x@y", string(make([]byte, 300))} {
		if err := validMaskHost(mask); !errdefs.IsInvalid(err) {
			t.Errorf("%q: want ErrInvalid, got %v", mask, err)
		}
	}
}
