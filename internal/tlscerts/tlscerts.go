// Package tlscerts is warren's own certificate authority for its TLS
// listener (`warren serve --tls-ca auto`): a CA made once in the data
// directory, and leaf certificates minted in memory on first use for each
// name a client asks for (SNI), only for the names warren serves: its
// domain and exactly one label under it (`<port>-<id>.<domain>`,
// `api.<domain>`). Clients trust the CA (`warren ca`, NODE_EXTRA_CA_CERTS).
//
// Per-name leaves rather than one wildcard: `*.localhost` is refused by
// some clients (a wildcard directly under a top-level name), and a leaf per
// name costs one signature on the first handshake for that name only.
package tlscerts

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// The CA's files in its directory.
const (
	CertFile = "ca.crt"
	keyFile  = "ca.key"
)

const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	leafLifetime = 90 * 24 * time.Hour
	// A cached leaf this close to its end is minted again.
	leafRenewBefore = 7 * 24 * time.Hour
	// Clocks of clients a little behind still accept a new leaf.
	backdate = time.Hour
	// maxLeaves bounds the cache (one entry per port and sandbox asked
	// for); past it, it starts over.
	maxLeaves = 8192
)

// CA signs leaf certificates for one domain's names.
type CA struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	domain  string
	// ips are put in the domain's own leaf, which a client that dials an
	// address (and so sends no SNI) gets.
	ips []net.IP
	log *slog.Logger
	// leafKey is shared by every leaf: minting is then one signature, and
	// the key never leaves memory.
	leafKey *ecdsa.PrivateKey

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// Options are what a CA serves.
type Options struct {
	// Dir holds the CA (made there on first use, the key 0600).
	Dir string
	// Domain is warren's sandbox domain.
	Domain string
	// IPs go into the certificate served to clients that send no name.
	IPs []net.IP
	Log *slog.Logger
}

// Open loads the CA in opts.Dir, or makes one there when there is none.
func Open(opts Options) (*CA, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	certPEM, key, err := loadOrCreate(opts.Dir)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return nil, fmt.Errorf("%s holds no PEM certificate: remove %s to make a new CA", filepath.Join(opts.Dir, CertFile), opts.Dir)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", filepath.Join(opts.Dir, CertFile), err)
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("make the leaf key: %w", err)
	}
	return &CA{
		cert: cert, key: key, certPEM: certPEM,
		domain: normalize(opts.Domain), ips: opts.IPs, log: opts.Log,
		leafKey: leafKey, leaves: make(map[string]*tls.Certificate),
	}, nil
}

// CertPEM is the CA's certificate, for clients to trust.
func (c *CA) CertPEM() []byte { return c.certPEM }

// Serves reports whether name (lower case, no trailing dot) is one warren
// mints for: the domain itself or exactly one label under it.
func Serves(domain, name string) bool {
	if name == domain {
		return true
	}
	label, ok := strings.CutSuffix(name, "."+domain)
	return ok && validLabel(label)
}

// validLabel: a DNS label (letters, digits, hyphens, 1 to 63 characters,
// no hyphen at either end).
func validLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for _, r := range l {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

func normalize(name string) string {
	return strings.TrimSuffix(strings.ToLower(name), ".")
}

// GetCertificate is tls.Config's: the leaf for the name the client asked
// for, minted on first use. A name warren does not serve fails the
// handshake, and the log says which.
func (c *CA) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := normalize(hello.ServerName)
	if name == "" {
		name = c.domain // a client that dialled an address
	}
	if !Serves(c.domain, name) {
		remote := ""
		if hello.Conn != nil {
			remote = hello.Conn.RemoteAddr().String()
		}
		c.log.Warn("TLS handshake refused: warren serves only its domain and <port>-<sandbox id>.<domain>", "name", name, "domain", c.domain, "remote", remote)
		return nil, fmt.Errorf("TLS name %q is not served here (domain %s): %w", name, c.domain, errdefs.ErrNotFound)
	}
	return c.Leaf(name, time.Now())
}

// Leaf returns the cached leaf for name, minting one when there is none or
// it ends soon after now.
func (c *CA) Leaf(name string, now time.Time) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.leaves[name]; ok && now.Add(leafRenewBefore).Before(l.Leaf.NotAfter) {
		return l, nil
	}
	l, err := c.mint(name, now)
	if err != nil {
		return nil, err
	}
	if len(c.leaves) >= maxLeaves {
		c.leaves = make(map[string]*tls.Certificate)
	}
	c.leaves[name] = l
	return l, nil
}

// mint signs a leaf for name (and, for the domain itself, the addresses a
// client without SNI may have dialled).
func (c *CA) mint(name string, now time.Time) (*tls.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("leaf serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    now.Add(-backdate),
		NotAfter:     now.Add(leafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if tmpl.NotAfter.After(c.cert.NotAfter) {
		tmpl.NotAfter = c.cert.NotAfter
	}
	if name == c.domain {
		tmpl.IPAddresses = c.ips
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &c.leafKey.PublicKey, c.key)
	if err != nil {
		return nil, fmt.Errorf("sign the leaf for %s: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse the leaf for %s: %w", name, err)
	}
	return &tls.Certificate{Certificate: [][]byte{der, c.cert.Raw}, PrivateKey: c.leafKey, Leaf: leaf}, nil
}

// loadOrCreate reads the CA's certificate and key in dir, or makes them.
func loadOrCreate(dir string) ([]byte, crypto.Signer, error) {
	certPath, keyPath := filepath.Join(dir, CertFile), filepath.Join(dir, keyFile)
	certPEM, certErr := os.ReadFile(certPath)
	keyPEM, keyErr := os.ReadFile(keyPath)
	switch {
	case certErr == nil && keyErr == nil:
		key, err := parseKey(keyPEM)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w (remove %s to make a new CA; clients must then trust the new one)", keyPath, err, dir)
		}
		return certPEM, key, nil
	case errors.Is(certErr, os.ErrNotExist) && errors.Is(keyErr, os.ErrNotExist):
		return create(dir)
	case certErr != nil && !errors.Is(certErr, os.ErrNotExist):
		return nil, nil, fmt.Errorf("read the CA certificate: %w", certErr)
	case keyErr != nil && !errors.Is(keyErr, os.ErrNotExist):
		return nil, nil, fmt.Errorf("read the CA key: %w", keyErr)
	default:
		return nil, nil, fmt.Errorf("%s holds only half a CA (%s and %s go together): restore the other or remove both to make a new CA: %w", dir, CertFile, keyFile, errdefs.ErrConflict)
	}
}

func parseKey(keyPEM []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("no PEM key")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("key of type %T cannot sign", k)
	}
	return s, nil
}

// create makes a CA in dir: the key first (0600), then the certificate,
// each written whole under a temporary name and renamed, so that a crash
// leaves no torn file.
func create(dir string) ([]byte, crypto.Signer, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("make %s: %w", dir, err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("make the CA key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	host, _ := os.Hostname()
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "warren CA " + host, Organization: []string{"warren"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign the CA certificate: %w", err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := writeFile(filepath.Join(dir, keyFile), keyPEM, 0o600); err != nil {
		return nil, nil, err
	}
	if err := writeFile(filepath.Join(dir, CertFile), certPEM, 0o644); err != nil {
		return nil, nil, err
	}
	return certPEM, key, nil
}

func writeFile(path string, b []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp, mode); err != nil { // WriteFile's mode passes the umask
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
