package config

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/warrenhq/warren/internal/errdefs"
)

// TLSCAAuto is --tls-ca's one value: warren's own CA in <data-dir>/tls.
const TLSCAAuto = "auto"

// TLSConfig is warren's TLS listener: the same API, sandbox plane and port
// routes as --listen, over TLS, with either the operator's certificate
// (Cert and Key: a wildcard for *.<domain> and the API's name) or warren's
// own CA (CA "auto"), which mints a leaf per name on first use.
type TLSConfig struct {
	// Listen is the TLS listener's address ("" = none).
	Listen string
	// Cert and Key are PEM files.
	Cert, Key string
	// CA is "auto" or "".
	CA string
}

// TLSDir holds warren's own CA (--tls-ca auto).
func (c *Config) TLSDir() string { return filepath.Join(c.DataDir, "tls") }

// validateTLS checks the TLS flags: a listener with exactly one source of
// certificates, and files that load, so that a bad flag stops the start
// with a message rather than failing every handshake later.
func (c *Config) validateTLS() error {
	t := c.TLS
	if t.Listen == "" {
		if t.Cert != "" || t.Key != "" || t.CA != "" {
			return fmt.Errorf("--tls-cert, --tls-key and --tls-ca need --tls-listen ADDR: %w", errdefs.ErrInvalid)
		}
		return nil
	}
	if _, _, err := net.SplitHostPort(t.Listen); err != nil {
		return fmt.Errorf("--tls-listen %q is not host:port: %w", t.Listen, errdefs.ErrInvalid)
	}
	if t.Listen == c.Listen {
		return fmt.Errorf("--tls-listen %s is also --listen: give TLS its own port: %w", t.Listen, errdefs.ErrInvalid)
	}
	switch {
	case t.CA != "" && t.CA != TLSCAAuto:
		return fmt.Errorf("--tls-ca %q: the one value is %q (warren's own CA in %s): %w", t.CA, TLSCAAuto, c.TLSDir(), errdefs.ErrInvalid)
	case t.CA != "" && (t.Cert != "" || t.Key != ""):
		return fmt.Errorf("--tls-ca auto and --tls-cert/--tls-key are two sources of certificates: give one: %w", errdefs.ErrInvalid)
	case t.CA == "" && t.Cert == "" && t.Key == "":
		return fmt.Errorf("--tls-listen needs certificates: --tls-cert FILE --tls-key FILE (a wildcard for *.%s and the API's name), or --tls-ca auto: %w", c.Domain, errdefs.ErrInvalid)
	case t.CA == "" && (t.Cert == "" || t.Key == ""):
		return fmt.Errorf("--tls-cert and --tls-key go together: give both: %w", errdefs.ErrInvalid)
	case t.CA == "":
		if _, err := tls.LoadX509KeyPair(t.Cert, t.Key); err != nil {
			return fmt.Errorf("--tls-cert %s / --tls-key %s: %w (%w)", t.Cert, t.Key, err, errdefs.ErrInvalid)
		}
	}
	return nil
}

// tlsFromEnv reads the WARREN_TLS_* variables that are set.
func tlsFromEnv(t *TLSConfig) {
	for env, dst := range map[string]*string{
		"WARREN_TLS_LISTEN": &t.Listen, "WARREN_TLS_CERT": &t.Cert, "WARREN_TLS_KEY": &t.Key, "WARREN_TLS_CA": &t.CA,
	} {
		if v := os.Getenv(env); v != "" {
			*dst = v
		}
	}
}
