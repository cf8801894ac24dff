package server

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/metrics"
)

// A 5xx answer is kept among the daemon's last errors, with its route and
// sandbox; a 4xx (the caller's fault) is not. Health without an admin key
// counts them but does not list them.
func TestServerErrorsAreRecorded(t *testing.T) {
	m := metrics.New(metrics.Options{})
	s := New(Deps{Metrics: m, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s.mux.HandleFunc("GET /boom/{id}", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, errors.New("the disk is on fire"))
	})
	s.mux.HandleFunc("GET /bad/{id}", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, errdefs.ErrInvalid)
	})
	for _, path := range []string{"/boom/sb1", "/bad/sb2"} {
		s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, path, nil))
	}
	got := m.Errors().Recent()
	if len(got) != 1 || got[0].Op != "GET /boom/{id}: 500" || got[0].Sandbox != "sb1" || got[0].Message != "the disk is on fire" {
		t.Fatalf("recorded errors = %+v, want the one 500", got)
	}

	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/health", nil))
	var h client.Health
	if err := json.Unmarshal(rec.Body.Bytes(), &h); err != nil {
		t.Fatal(err)
	}
	if h.ErrorsTotal != 1 || h.LastErrors != nil || strings.Contains(rec.Body.String(), "sb1") {
		t.Fatalf("health without a key: %s", rec.Body)
	}
}
