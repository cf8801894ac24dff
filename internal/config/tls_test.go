package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
)

// A bad TLS flag stops the start with a message naming the flag: a
// certificate without its key, files that do not load, two sources of
// certificates, or a listener without any.
func TestValidateTLS(t *testing.T) {
	agent := filepath.Join(t.TempDir(), "warren-agent")
	if err := os.WriteFile(agent, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(t.TempDir(), "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		tls  TLSConfig
		want string // "" = valid
	}{
		{"none", TLSConfig{}, ""},
		{"auto CA", TLSConfig{Listen: "127.0.0.1:3443", CA: "auto"}, ""},
		{"cert without listener", TLSConfig{Cert: junk, Key: junk}, "need --tls-listen"},
		{"listener without certificates", TLSConfig{Listen: "127.0.0.1:3443"}, "needs certificates"},
		{"cert without key", TLSConfig{Listen: "127.0.0.1:3443", Cert: junk}, "go together"},
		{"key without cert", TLSConfig{Listen: "127.0.0.1:3443", Key: junk}, "go together"},
		{"unreadable files", TLSConfig{Listen: "127.0.0.1:3443", Cert: "/nonexistent/c.pem", Key: "/nonexistent/k.pem"}, "no such file"},
		{"files that are not PEM", TLSConfig{Listen: "127.0.0.1:3443", Cert: junk, Key: junk}, "--tls-cert"},
		{"CA and cert", TLSConfig{Listen: "127.0.0.1:3443", CA: "auto", Cert: junk, Key: junk}, "two sources"},
		{"unknown CA mode", TLSConfig{Listen: "127.0.0.1:3443", CA: "/etc/ca.pem"}, "--tls-ca"},
		{"not host:port", TLSConfig{Listen: "3443", CA: "auto"}, "--tls-listen"},
		{"same as --listen", TLSConfig{Listen: "127.0.0.1:3000", CA: "auto"}, "also --listen"},
	} {
		c := Default()
		c.DataDir, c.AgentBinary, c.Listen = t.TempDir(), agent, "127.0.0.1:3000"
		c.TLS = tc.tls
		err := c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (!errdefs.IsInvalid(err) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: want ErrInvalid containing %q, got %v", tc.name, tc.want, err)
		}
	}
}
