package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestInlineBody: a small body of known length is read ahead and can be
// read again (the transport resends it on a closed connection); a stream,
// a large body and one behind Expect: 100-continue are left to the copy.
func TestInlineBody(t *testing.T) {
	small := `{"command":"true"}`
	for _, c := range []struct {
		name   string
		req    func() *http.Request
		inline bool
	}{
		{"small", func() *http.Request {
			return httptest.NewRequest("POST", "/sandboxes/a/exec", strings.NewReader(small))
		}, true},
		{"stream", func() *http.Request {
			r := httptest.NewRequest("POST", "/process.Process/Start", io.NopCloser(strings.NewReader(small)))
			r.ContentLength = -1
			return r
		}, false},
		{"large", func() *http.Request {
			return httptest.NewRequest("POST", "/files", strings.NewReader(strings.Repeat("x", maxInlineBody+1)))
		}, false},
		{"expect continue", func() *http.Request {
			r := httptest.NewRequest("POST", "/files", strings.NewReader(small))
			r.Header.Set("Expect", "100-continue")
			return r
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.req()
			body := r.Body
			if _, err := inlineBody(r); err != nil {
				t.Fatal(err)
			}
			if got := r.GetBody != nil; got != c.inline {
				t.Fatalf("inlined %v, want %v", got, c.inline)
			}
			if !c.inline {
				if r.Body != body {
					t.Fatal("a body that is not inlined must be the client's own")
				}
				return
			}
			for range 2 {
				b, _ := r.GetBody()
				if got, _ := io.ReadAll(b); string(got) != small {
					t.Fatalf("GetBody read %q, want %q", got, small)
				}
			}
			if got, _ := io.ReadAll(r.Body); string(got) != small {
				t.Fatalf("body %q, want %q", got, small)
			}
		})
	}
	r := httptest.NewRequest("POST", "/sandboxes/a/exec", strings.NewReader(small[:4]))
	r.ContentLength = int64(len(small))
	if _, err := inlineBody(r); err == nil {
		t.Fatal("a body shorter than its Content-Length read without error")
	}
}
