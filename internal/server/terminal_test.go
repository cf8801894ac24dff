package server

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
)

func TestTerminalKeyFromProtocol(t *testing.T) {
	var got string
	h := keyFromProtocol(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = r.Header.Get("X-API-Key") }))
	for _, c := range []struct {
		name, header, protocols, want string
	}{
		{"subprotocol", "", "warren.terminal.v1, warren.key." + base64.RawURLEncoding.EncodeToString([]byte("e2b_k+/=")), "e2b_k+/="},
		{"header wins", "hdr", "warren.terminal.v1, warren.key." + base64.RawURLEncoding.EncodeToString([]byte("proto")), "hdr"},
		{"none", "", "warren.terminal.v1", ""},
		{"not base64", "", "warren.key.!!!", ""},
	} {
		r := httptest.NewRequest(http.MethodGet, "/sandboxes/x/terminal", nil)
		if c.header != "" {
			r.Header.Set("X-API-Key", c.header)
		}
		r.Header.Set("Sec-WebSocket-Protocol", c.protocols)
		got = "unset"
		h.ServeHTTP(httptest.NewRecorder(), r)
		if got != c.want {
			t.Errorf("%s: key %q, want %q", c.name, got, c.want)
		}
	}
}

func TestTerminalSameOrigin(t *testing.T) {
	for origin, ok := range map[string]bool{
		"":                        true, // not a browser: the CLI
		"http://127.0.0.1:3000":   true,
		"https://127.0.0.1:3000":  true, // a TLS front end's scheme
		"http://evil.example":     false,
		"http://127.0.0.1:3001":   false,
		"null":                    false,
		"http://127.0.0.1:3000.x": false,
	} {
		r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:3000/sandboxes/x/terminal", nil)
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		err := sameOrigin(r)
		if (err == nil) != ok {
			t.Errorf("origin %q: %v, want ok=%v", origin, err, ok)
		}
		if err != nil && !errors.Is(err, errdefs.ErrPermissionDenied) {
			t.Errorf("origin %q: %v is not a 403", origin, err)
		}
	}
}

func TestTerminalSize(t *testing.T) {
	for q, want := range map[string][2]uint32{"": {80, 24}, "?cols=120&rows=40": {120, 40}, "?rows=10": {80, 10}} {
		r := httptest.NewRequest(http.MethodGet, "/sandboxes/x/terminal"+q, nil)
		c, rows, err := termSizeOf(r)
		if err != nil || c != want[0] || rows != want[1] {
			t.Errorf("%q: %d×%d %v, want %v", q, c, rows, err, want)
		}
	}
	for _, q := range []string{"?cols=0", "?rows=1001", "?cols=abc", "?cols=-5"} {
		r := httptest.NewRequest(http.MethodGet, "/sandboxes/x/terminal"+q, nil)
		if _, _, err := termSizeOf(r); !errdefs.IsInvalid(err) {
			t.Errorf("%q: %v, want a 400", q, err)
		}
	}
}
