package server

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
)

// openAPIDoc is the document as GET /openapi.json serves it.
func openAPIDoc(t *testing.T) map[string]any {
	t.Helper()
	b, err := openAPIJSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return doc
}

func testServer() *Server {
	return New(Deps{MCP: http.NotFoundHandler(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func TestOpenAPIServed(t *testing.T) {
	rec := httptest.NewRecorder()
	testServer().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.json", nil)) // no key
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /openapi.json: %d %q: %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatalf("GET /openapi.json is not JSON: %v", err)
	}
	if !regexp.MustCompile(`^3\.1\.\d+$`).MatchString(doc.OpenAPI) || doc.Paths["/sandboxes"] == nil {
		t.Fatalf("GET /openapi.json: openapi %q, %d paths", doc.OpenAPI, len(doc.Paths))
	}
	// The document has no nulls: one is a YAML slip, such as an unquoted
	// comma in a {flow: mapping}, which makes a key of what follows it.
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch v := v.(type) {
		case nil:
			t.Errorf("api/openapi.yaml: %s is null", where)
		case map[string]any:
			for k, e := range v {
				walk(where+"/"+k, e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s/%d", where, i), e)
			}
		}
	}
	walk("", openAPIDoc(t))
}
