package server

import (
	"fmt"
	"net/http"
	"sync"

	"sigs.k8s.io/yaml"

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
	b, err := yaml.YAMLToJSON([]byte(api.OpenAPI()))
	if err != nil {
		return nil, fmt.Errorf("api/openapi.yaml: %w", err)
	}
	return b, nil
})

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
