package tlscerts

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestServes(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"localhost", true},
		{"8000-abc123.localhost", true},
		{"api.localhost", true},
		{"a.b.localhost", false},
		{"evil.com", false},
		{"xlocalhost", false},
		{".localhost", false},
		{"-x.localhost", false},
		{"x_y.localhost", false},
		{"", false},
	} {
		if got := Serves("localhost", tc.name); got != tc.want {
			t.Errorf("Serves(localhost, %q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCAMintsVerifiableLeavesOnlyForServedNames(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	ca, err := Open(Options{Dir: dir, Domain: "Example.test.", IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("CA key mode %v, want 0600", st.Mode().Perm())
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca.CertPEM()) {
		t.Fatal("CertPEM is not a PEM certificate")
	}
	verify := func(c *tls.Certificate, name string) {
		t.Helper()
		inter := x509.NewCertPool()
		if _, err := c.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, Intermediates: inter}); err != nil {
			t.Errorf("leaf for %s does not verify: %v", name, err)
		}
	}
	for _, name := range []string{"8000-sbx1.example.test", "API.example.test", "example.test"} {
		c, err := ca.GetCertificate(&tls.ClientHelloInfo{ServerName: name})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		verify(c, normalize(name))
	}
	// No SNI (the client dialled an address): the domain's leaf, which
	// also names the listener's addresses.
	c, err := ca.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Leaf.Verify(x509.VerifyOptions{DNSName: "127.0.0.1", Roots: pool}); err != nil {
		t.Errorf("the no-SNI leaf does not verify for 127.0.0.1: %v", err)
	}
	for _, name := range []string{"evil.com", "a.b.example.test", "example.test.evil.com"} {
		if _, err := ca.GetCertificate(&tls.ClientHelloInfo{ServerName: name}); err == nil {
			t.Errorf("%s: minted a leaf for a name warren does not serve", name)
		}
	}

	// Cached: the second handshake for a name signs nothing.
	a, _ := ca.Leaf("1-x.example.test", time.Now())
	b, _ := ca.Leaf("1-x.example.test", time.Now())
	if a != b {
		t.Error("a second Leaf for the same name minted again")
	}
	// A leaf near its end is minted anew.
	later, _ := ca.Leaf("1-x.example.test", time.Now().Add(leafLifetime-leafRenewBefore/2))
	if later == a {
		t.Error("a leaf about to expire was served from the cache")
	}

	// Opened again, the same CA (clients keep trusting it).
	again, err := Open(Options{Dir: dir, Domain: "example.test"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.CertPEM(), ca.CertPEM()) {
		t.Error("a second Open made a new CA")
	}
}

func TestOpenRefusesHalfACA(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, CertFile), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: dir, Domain: "localhost"}); err == nil {
		t.Fatal("Open made a CA beside a lone certificate")
	}
}
