package server

import (
	"fmt"
	"net/http"

	"github.com/warrenhq/warren/internal/errdefs"
)

// caRoutes serve the certificate of the CA the TLS listener mints with
// (--tls-ca auto), for clients to trust: public, like any CA certificate.
type caRoutes struct {
	pem []byte // nil: no CA of warren's own
}

// caCert answers GET /tls/ca.pem.
func (s *caRoutes) caCert(w http.ResponseWriter, r *http.Request) {
	if len(s.pem) == 0 {
		writeError(w, r, fmt.Errorf("this server has no CA of its own: it serves TLS with the operator's certificate (--tls-cert), or no TLS; start it with --tls-listen ADDR --tls-ca auto for one: %w", errdefs.ErrNotFound))
		return
	}
	w.Header().Set("Content-Type", "application/x-pem-file")
	_, _ = w.Write(s.pem)
}
