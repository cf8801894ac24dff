package server

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
)

// Any request body decodes into the API's request types or is refused
// with ErrInvalid (bad JSON) or the too-large error — never a panic, never
// another kind of error that the edge would turn into a 500.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{}`, ``, `{"templateID":"base","timeout":0,"metadata":{"a":"b"}}`, `[]`, `null`, `{"cmd":["sh","-c","x"],"envs":{"A":"1"}}`,
		`{"timeout":-1e400}`, `{"count":99999999999999999999}`, `{"a":` + strings.Repeat("[", 5000), "\x00", `{"memory":"yes"}`, `{"snapshotID":"` + strings.Repeat("x", 100000) + `"}`} {
		f.Add(s)
	}
	targets := []func() any{
		func() any { return &client.NewSandbox{} },
		func() any { return &client.ExecRequest{} },
		func() any { return &client.NewSnapshot{} },
		func() any { return &client.ForkRequest{} },
		func() any { return &client.RollbackRequest{} },
		func() any { return &client.NetworkPolicy{} },
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, mk := range targets {
			r := httptest.NewRequest("POST", "/x", strings.NewReader(body))
			w := httptest.NewRecorder()
			err := decodeJSON(w, r, mk())
			if err != nil && !errdefs.IsInvalid(err) && !errors.Is(err, errTooLarge) {
				t.Fatalf("decode %.80q: %v is neither invalid nor too large", body, err)
			}
		}
	})
}
