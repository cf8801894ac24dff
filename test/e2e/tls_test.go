package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// tlsClient speaks HTTPS to the daemon's TLS listener at addr whatever the
// URL's host (so that <port>-<id>.localhost needs no resolver here), trusting
// only the CA in caPEM; the URL's host is the SNI name.
func tlsClient(t *testing.T, addr string, caPEM []byte) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("not a PEM certificate: %q", caPEM)
	}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, addr)
		},
	}}
}

// TestTLS serves the API, the sandbox plane and port URLs over TLS with
// warren's own CA (--tls-ca auto): leaves verify against the CA `warren ca`
// prints for the domain, api.<domain> and <port>-<id>.<domain>; a client
// that dials the address (no SNI) gets one naming it; any other name fails
// the handshake with a log line; the CA survives a restart.
func TestTLS(t *testing.T) {
	t.Parallel()
	tlsAddr := freePort(t)
	d := busyboxDaemon(t, "--tls-listen", tlsAddr, "--tls-ca", "auto")
	ctx := ctxT(t, 3*time.Minute)
	caPEM := []byte(d.mustCLI("ca"))
	if st, err := os.Stat(filepath.Join(d.dataDir, "tls", "ca.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the CA key: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
	hc := tlsClient(t, tlsAddr, caPEM)
	c := d.client()
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	id := sb.SandboxID
	page := "over TLS from " + id + "\n"
	if _, err := c.Files.MakeDir(ctx, id, "/www"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Files.Write(ctx, id, "/www/index.html", strings.NewReader(page), 0o644, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Processes.Start(ctx, id, client.StartProcessRequest{Tag: "httpd", ExecRequest: client.ExecRequest{Cmd: []string{"httpd", "-f", "-p", "8000", "-h", "/www"}}}); err != nil {
		t.Fatal(err)
	}
	get := func(url string, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	portURL := "https://8000-" + id + ".localhost/index.html"
	token := map[string]string{"e2b-traffic-access-token": sb.TrafficAccessToken}
	waitFor(t, 10*time.Second, "httpd through the TLS port URL", func() bool {
		resp, _ := get(portURL, token)
		return resp.StatusCode == 200
	})
	resp, body := get(portURL, token)
	if body != page || resp.Proto != "HTTP/1.1" || resp.TLS == nil {
		t.Fatalf("port URL over TLS: %s %s %q", resp.Proto, resp.Status, body)
	}
	if resp, body := get(portURL, nil); resp.StatusCode != 403 || !strings.Contains(body, "Token header 'e2b-traffic-access-token' is missing") {
		t.Errorf("private port over TLS without the token: %d %s", resp.StatusCode, body)
	}
	// The REST API on the same listener: by the domain, by api.<domain>
	// and by the address (no SNI: the leaf names loopback).
	for _, url := range []string{"https://localhost/health", "https://api.localhost/health", "https://127.0.0.1/health"} {
		if resp, body := get(url, nil); resp.StatusCode != 200 || !strings.Contains(body, `"status"`) {
			t.Errorf("GET %s: %d %s", url, resp.StatusCode, body)
		}
	}
	if resp, body := get("https://api.localhost/sandboxes/"+id, map[string]string{"X-API-Key": d.key}); resp.StatusCode != 200 || !strings.Contains(body, id) {
		t.Errorf("GET /sandboxes/%s over TLS: %d %s", id, resp.StatusCode, body)
	}

	t.Run("maskRequestHost", func(t *testing.T) { testMaskRequestHost(t, d, ctx, get) })

	// Names warren does not serve: no certificate, the handshake fails.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	for _, name := range []string{"evil.example", "a.b.localhost", "localhost.evil.example"} {
		conn, err := tls.Dial("tcp", tlsAddr, &tls.Config{ServerName: name, RootCAs: pool})
		if err == nil {
			conn.Close()
			t.Errorf("TLS name %s: the handshake succeeded", name)
		}
	}
	waitFor(t, 5*time.Second, "the refused name in the log", func() bool {
		return strings.Contains(d.log.String(), "TLS handshake refused") && strings.Contains(d.log.String(), "name=evil.example")
	})

	// A killed sandbox's port URL: E2B's 502, over TLS too.
	if err := c.Sandboxes.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if resp, body := get(portURL, token); resp.StatusCode != 502 || body != `{"code":502,"message":"The sandbox was not found","sandboxId":"`+id+`"}`+"\n" {
		t.Errorf("a killed sandbox's port URL: %d %q", resp.StatusCode, body)
	}

	// A restart keeps the CA (clients that trust it keep working).
	d.stop(syscall.SIGTERM)
	d.start()
	if again := d.mustCLI("ca"); again != string(caPEM) {
		t.Errorf("the CA changed across a restart")
	}
}

// TestTLSFlags: a bad TLS flag stops `warren serve` before it makes anything,
// with a message naming the flag; the operator's certificate is served as
// given, and such a daemon has no CA to print.
func TestTLSFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := writeWildcardCert(t, dir)
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	for what, tc := range map[string]struct {
		args []string
		want string
	}{
		"cert without key":    {[]string{"--tls-listen", addr, "--tls-cert", certFile}, "--tls-cert and --tls-key go together"},
		"unreadable files":    {[]string{"--tls-listen", addr, "--tls-cert", "/nonexistent/c.pem", "--tls-key", "/nonexistent/k.pem"}, "no such file"},
		"files that are junk": {[]string{"--tls-listen", addr, "--tls-cert", junk, "--tls-key", junk}, "--tls-cert " + junk},
		"tls-ca with cert":    {[]string{"--tls-listen", addr, "--tls-ca", "auto", "--tls-cert", certFile, "--tls-key", keyFile}, "two sources of certificates"},
		"tls-ca not auto":     {[]string{"--tls-listen", addr, "--tls-ca", "/etc/ssl/ca.pem"}, `--tls-ca "/etc/ssl/ca.pem"`},
		"no certificates":     {[]string{"--tls-listen", addr}, "--tls-listen needs certificates"},
		"cert without listen": {[]string{"--tls-cert", certFile, "--tls-key", keyFile}, "need --tls-listen"},
	} {
		dataDir := filepath.Join(t.TempDir(), "data")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		args := append([]string{"serve", "--data-dir", dataDir, "--listen", freePort(t), "--build-base=false"}, tc.args...)
		out, err := exec.CommandContext(ctx, filepath.Join(binDir(t), "warren"), args...).CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: want a failed start saying %q, got %v: %s", what, tc.want, err, out)
		}
		if _, err := os.Stat(dataDir); err == nil {
			t.Errorf("%s: the refused start made %s", what, dataDir)
		}
	}

	// The operator's wildcard certificate, served as given.
	tlsAddr := freePort(t)
	d := newDaemon(t, "--tls-listen", tlsAddr, "--tls-cert", certFile, "--tls-key", keyFile)
	d.start()
	pemBytes, _ := os.ReadFile(certFile)
	conn, err := tls.Dial("tcp", tlsAddr, &tls.Config{ServerName: "8000-abc.localhost", RootCAs: poolOf(t, pemBytes)})
	if err != nil {
		t.Fatalf("handshake with the operator's certificate: %v", err)
	}
	conn.Close()
	if out, errOut, code := d.cli("", "ca"); code == 0 || !strings.Contains(errOut, "no CA of its own") {
		t.Errorf("warren ca without --tls-ca auto: exit %d, %s %s", code, out, errOut)
	}
}

func poolOf(t *testing.T, pemBytes []byte) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatal("not a PEM certificate")
	}
	return pool
}

// writeWildcardCert writes a self-signed certificate for *.localhost and
// localhost, as an operator's wildcard would be, and its key.
func writeWildcardCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames:  []string{"*.localhost", "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	k8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k8}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// testMaskRequestHost creates a public sandbox with --mask-request-host
// through the CLI and checks that its server is sent that Host, ${PORT}
// filled in, over TLS; a mask that could split a header is a 400 that
// makes no sandbox.
func testMaskRequestHost(t *testing.T, d *daemon, ctx context.Context, get func(string, map[string]string) (*http.Response, string)) {
	id := strings.TrimSpace(d.mustCLI("sandbox", "create", "--template", "bb", "--public-ports", "--mask-request-host", "localhost:${PORT}"))
	if info := d.mustCLI("sandbox", "get", id); !strings.Contains(info, "ports see Host localhost:${PORT}") {
		t.Errorf("sandbox get does not show the mask:\n%s", info)
	}
	c := d.client()
	if _, err := c.Files.Write(ctx, id, "/headers.sh", strings.NewReader(headersScript), 0o755, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Processes.Start(ctx, id, client.StartProcessRequest{Tag: "headers", ExecRequest: client.ExecRequest{Cmd: []string{"nc", "-ll", "-p", "8004", "-e", "/headers.sh"}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the headers server", func() bool {
		resp, _ := get("https://8004-"+id+".localhost/", nil)
		return resp.StatusCode == 200
	})
	resp, seen := get("https://8004-"+id+".localhost/", nil)
	// The Host is the mask's; the name the caller used stays in
	// X-Forwarded-Host, and the scheme in X-Forwarded-Proto.
	for _, want := range []string{"\nHost: localhost:8004", "X-Forwarded-Host: 8004-" + id + ".localhost", "X-Forwarded-Proto: https"} {
		if resp.StatusCode != 200 || !strings.Contains(seen, want) {
			t.Errorf("the server inside was sent:\n%s\nwant %q", seen, want)
		}
	}

	before, _, err := c.Sandboxes.List(ctx, client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	code, body := d.postAPI(ctx, "/sandboxes", `{"templateID":"bb","network":{"maskRequestHost":"evil.com\r\nX-Injected: 1"}}`)
	if code != 400 || !strings.Contains(body, "maskRequestHost") {
		t.Errorf("a header-splitting mask: %d %s, want 400 naming maskRequestHost", code, body)
	}
	after, _, err := c.Sandboxes.List(ctx, client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("the refused create left a sandbox: %d before, %d after", len(before), len(after))
	}
}
