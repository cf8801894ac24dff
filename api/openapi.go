// Package api holds the definitions both sides of warren share: the .proto
// files of the agent's and envd's protocols (proto/, generated into gen/)
// and the OpenAPI document of the REST API (openapi.yaml).
package api

import _ "embed"

//go:embed openapi.yaml
var openAPI string

// OpenAPI returns api/openapi.yaml, the OpenAPI 3.1 document of warren's
// REST API (the daemon serves it as JSON at GET /openapi.json).
func OpenAPI() string { return openAPI }
