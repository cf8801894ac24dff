package fakenet

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// HTTPSNames are the names the HTTPS servers have certificates for, with
// the address each answers on (port 443).
var HTTPSNames = map[string]string{
	"allowed.example": Servers[0],
	"denied.example":  Servers[1],
	"other.example":   Servers[2],
}

// ServeHTTPS starts HTTPS servers on the upstream's HTTPSNames addresses,
// with a certificate from a CA of their own, whose PEM it writes to
// dir/upstream-ca.pem and returns the path of. GET /download?bytes=N
// answers N zero bytes; any other request is answered with the headers it
// carried, one "Name: value" a line, so a test sees what reached the
// upstream.
func (in *Internet) ServeHTTPS(dir string) (string, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fake internet test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", err
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "fake upstream"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for name := range HTTPSNames {
		tmpl.DNSNames = append(tmpl.DNSNames, name)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return "", err
	}
	cert := tls.Certificate{Certificate: [][]byte{der, caDER}, PrivateKey: key}
	caPath := filepath.Join(dir, "upstream-ca.pem")
	if err := os.WriteFile(caPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		return "", err
	}
	for _, addr := range HTTPSNames {
		err := in.Listen(in.UpstreamNS, addr+":443", func(ln net.Listener) io.Closer {
			srv := &http.Server{Handler: http.HandlerFunc(serveEchoHTTPS), ReadHeaderTimeout: 10 * time.Second,
				TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}}
			go func() { _ = srv.Serve(tls.NewListener(ln, srv.TLSConfig)) }()
			return srv
		})
		if err != nil {
			return "", err
		}
	}
	return caPath, nil
}

func serveEchoHTTPS(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/upgrade" && strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		// After a 101, whatever the client sends comes back (a stand-in
		// for a websocket's frames).
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		_ = rw.Flush()
		_, _ = io.Copy(conn, rw)
		return
	}
	if r.URL.Path == "/download" {
		n, _ := strconv.Atoi(r.URL.Query().Get("bytes"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		zero := make([]byte, 256<<10)
		for left := n; left > 0; left -= len(zero) {
			if _, err := w.Write(zero[:min(left, len(zero))]); err != nil {
				return
			}
		}
		return
	}
	var lines []string
	for k, vs := range r.Header {
		for _, v := range vs {
			lines = append(lines, k+": "+v)
		}
	}
	sort.Strings(lines)
	fmt.Fprintf(w, "upstream %s saw host %s over %s\n%s\n", r.TLS.ServerName, r.Host, r.Proto, strings.Join(lines, "\n"))
}
