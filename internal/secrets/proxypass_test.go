package secrets

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/warrenhq/warren/internal/store"
)

// TestProxyPasswordSealed checks that a sandbox's SOCKS5 password is sealed
// in its row, reads back in clear, that a row written in clear before still
// reads, and that a sealed password does not open under another key.
func TestProxyPasswordSealed(t *testing.T) {
	ctx := context.Background()
	_, st, dir := newService(t)
	keys, err := OpenKeyring(filepath.Join(dir, "secrets"))
	if err != nil {
		t.Fatal(err)
	}
	st.SetNetworkSealer(keys)
	const pw = "socks-pass-0123456789"
	pol := &store.NetworkPolicy{AllowInternetAccess: true, EgressProxy: &store.NetworkEgressProxy{Address: "203.0.113.7:1080", Username: "u", Password: pw}}
	sb := store.Sandbox{ID: "sb1", Team: "default", Template: "base", Runtime: "native", State: store.StateCreating, Network: pol}
	if err := st.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if pol.EgressProxy.Password != pw || pol.EgressProxy.SealedPassword != "" {
		t.Fatalf("the caller's policy changed: %+v", pol.EgressProxy)
	}
	row := rawNetwork(t, dir, "sb1")
	if strings.Contains(row, pw) || !strings.Contains(row, `"sealedPassword":"v1:`) {
		t.Fatalf("stored row %s: want the password sealed", row)
	}
	got, err := st.GetSandbox(ctx, "sb1")
	if err != nil {
		t.Fatal(err)
	}
	if ep := got.Network.EgressProxy; ep.Password != pw || ep.SealedPassword != "" {
		t.Fatalf("read back %+v", ep)
	}
	// A row written before sealing (clear) still reads.
	db := openRaw(t, dir)
	if _, err := db.Exec(`UPDATE sandboxes SET network = ? WHERE id = 'sb1'`, `{"allowInternetAccess":true,"egressProxy":{"address":"203.0.113.7:1080","username":"u","password":"old"}}`); err != nil {
		t.Fatal(err)
	}
	if got, err = st.GetSandbox(ctx, "sb1"); err != nil || got.Network.EgressProxy.Password != "old" {
		t.Fatalf("clear row: %+v, %v", got.Network, err)
	}
	// An update seals again.
	if err := st.SetSandboxNetwork(ctx, "sb1", pol); err != nil {
		t.Fatal(err)
	}
	if row := rawNetwork(t, dir, "sb1"); strings.Contains(row, pw) {
		t.Fatalf("row after update holds the password: %s", row)
	}
	// Under another data directory's key it does not open, and says so
	// without the password.
	other, err := OpenKeyring(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, err := keys.SealProxyPassword(pw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.OpenProxyPassword(s); err == nil || strings.Contains(err.Error(), pw) {
		t.Fatalf("open under another key: %v", err)
	}
	if _, err := keys.OpenProxyPassword("v9:" + s[3:]); err == nil {
		t.Fatal("an unknown version opened")
	}
}

func openRaw(t *testing.T, dir string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func rawNetwork(t *testing.T, dir, id string) string {
	t.Helper()
	var s string
	if err := openRaw(t, dir).QueryRow(`SELECT network FROM sandboxes WHERE id = ?`, id).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}
