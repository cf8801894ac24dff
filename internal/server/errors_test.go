package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/internal/errdefs"
)

// What an agent says never becomes an authentication answer of the API:
// only the daemon's own key check answers 401 with a challenge.
func TestAgentCannotAnswerUnauthenticated(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		status    int
		challenge bool
	}{
		{"the daemon's own key check", fmt.Errorf("bad key: %w", errdefs.ErrUnauthenticated), http.StatusUnauthorized, true},
		{"an agent's Unauthenticated", fmt.Errorf("sandbox agent: %w", connect.NewError(connect.CodeUnauthenticated, errors.New("invalid username"))), http.StatusBadRequest, false},
		{"an agent's PermissionDenied", connect.NewError(connect.CodePermissionDenied, errors.New("open /root: permission denied")), http.StatusForbidden, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			writeError(w, httptest.NewRequest("GET", "/sandboxes/x/files?path=/a", nil), tc.err)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d", w.Code, tc.status)
			}
			if got := w.Header().Get("WWW-Authenticate") != ""; got != tc.challenge {
				t.Fatalf("WWW-Authenticate set: %v, want %v", got, tc.challenge)
			}
		})
	}
	res := &http.Response{Header: http.Header{"Www-Authenticate": {`Bearer realm="x"`}, "Proxy-Authenticate": {"Basic"}}}
	if err := dropChallenges(res); err != nil || len(res.Header) != 0 {
		t.Fatalf("an agent's challenges pass the envd proxy: %v %v", res.Header, err)
	}
}
