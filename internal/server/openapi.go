package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/warrenhq/warren/api"
)

// routeMux is the server's ServeMux; it keeps the patterns registered on
// it, so that a test can hold api/openapi.yaml to the routes served.
type routeMux struct {
	*http.ServeMux
	patterns []string
}

func newRouteMux() *routeMux { return &routeMux{ServeMux: http.NewServeMux()} }

func (m *routeMux) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, h)
}

func (m *routeMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(h))
}

// openAPIJSON is api/openapi.yaml as JSON, converted once.
var openAPIJSON = sync.OnceValues(func() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal([]byte(api.OpenAPI()), &doc); err != nil {
		return nil, fmt.Errorf("api/openapi.yaml: %w", err)
	}
	b, err := json.Marshal(jsonKeys(doc))
	if err != nil {
		return nil, fmt.Errorf("api/openapi.yaml as JSON: %w", err)
	}
	return b, nil
})

// jsonKeys turns the maps YAML decodes with keys other than strings (a
// response's status code, 200:) into maps JSON can encode; the daemon
// does not use sigs.k8s.io/yaml for this, to link no k8s.io module.
func jsonKeys(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = jsonKeys(e)
		}
		return t
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[fmt.Sprint(k)] = jsonKeys(e)
		}
		return m
	case []any:
		for i, e := range t {
			t[i] = jsonKeys(e)
		}
		return t
	}
	return v
}

// serveOpenAPI serves GET /openapi.json: the API's OpenAPI 3.1 document. It
// needs no key: it describes the API, not anything in it.
func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	doc, err := openAPIJSON()
	if err != nil {
		writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(doc)
}
