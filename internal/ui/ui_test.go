package ui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandlerServesPageWithCSP(t *testing.T) {
	h := Handler()
	for _, path := range []string{"/ui/", "/ui/sandbox/x", "/ui/index.html"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK && rec.Code != http.StatusMovedPermanently {
			t.Fatalf("%s: %d", path, rec.Code)
		}
		if got := rec.Header().Get("Content-Security-Policy"); got != CSP {
			t.Errorf("%s: CSP %q", path, got)
		}
		if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no nosniff", path)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ui/", nil))
	body := rec.Body.String()
	if !strings.Contains(body, `<script type="module" crossorigin src="/ui/assets/`) {
		t.Errorf("page has no module script:\n%s", body)
	}
	if strings.Contains(body, "<script>") || strings.Contains(body, "<script type=\"module\">") {
		t.Errorf("page has an inline script, which the CSP refuses:\n%s", body)
	}
	if !strings.Contains(CSP, "frame-ancestors 'none'") || strings.Contains(CSP, "script-src 'self' 'unsafe") {
		t.Errorf("CSP is not strict: %s", CSP)
	}
}
