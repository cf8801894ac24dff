package server

import (
	"crypto/tls"
	"net/http/httptest"
	"testing"
)

// A copy's upload link names the server the caller reached: through a
// fleet gateway the gateway (X-Forwarded-Host and -Proto), which routes
// the upload back to the node.
func TestUploadBase(t *testing.T) {
	r := httptest.NewRequest("GET", "/templates/t/files/h", nil)
	r.Host = "node-a:3000"
	if got := uploadBase(r); got != "http://node-a:3000" {
		t.Errorf("direct: %s", got)
	}
	r.TLS = &tls.ConnectionState{}
	if got := uploadBase(r); got != "https://node-a:3000" {
		t.Errorf("direct over TLS: %s", got)
	}
	r.Header.Set("X-Forwarded-Host", "warren.example.com")
	r.Header.Set("X-Forwarded-Proto", "https")
	if got := uploadBase(r); got != "https://warren.example.com" {
		t.Errorf("through a gateway: %s", got)
	}
	r.TLS = nil
	r.Header.Set("X-Forwarded-Proto", "gopher")
	if got := uploadBase(r); got != "http://warren.example.com" {
		t.Errorf("a proto that is no scheme: %s", got)
	}
}
