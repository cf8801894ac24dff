package secrets

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

func newService(t *testing.T) (*Service, *store.Store, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(context.Background(), filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	keys, err := OpenKeyring(filepath.Join(dir, "secrets"))
	if err != nil {
		t.Fatal(err)
	}
	return NewService(st, keys), st, dir
}

// TestSecretsAtRest checks that values are sealed (the database never holds
// the plaintext), per team, and that versions and deletes reach Resolve.
func TestSecretsAtRest(t *testing.T) {
	ctx := context.Background()
	svc, _, dir := newService(t)
	const value = "sk-live-0123456789abcdef"
	rec, err := svc.Create(ctx, "team-a", New{Name: "OpenAI", Value: NewValue(value), AllowedHosts: []string{"api.openai.com"}})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Name != "openai" || !strings.HasPrefix(rec.ID, "sec_") || rec.Version != 1 {
		t.Fatalf("created %+v", rec)
	}
	if st, err := os.Stat(filepath.Join(dir, "secrets", "key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	for _, f := range []string{"db", "db-wal"} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		if strings.Contains(string(b), value) {
			t.Fatalf("%s holds the plaintext", f)
		}
	}
	r, err := svc.Resolve(ctx, "team-a", "OPENAI")
	if err != nil || r.Value.Reveal() != value || r.Version != 1 {
		t.Fatalf("resolve: %v %v", r, err)
	}
	if s := fmt.Sprintf("%v %+v %#v %s", r.Value, r, r.Value, r.Value); strings.Contains(s, value) {
		t.Fatalf("formatting shows the value: %s", s)
	}
	if _, err := svc.Resolve(ctx, "team-b", "openai"); !errdefs.IsNotFound(err) {
		t.Fatalf("other team resolved it: %v", err)
	}
	if _, err := svc.Create(ctx, "team-a", New{Name: "openai", Value: NewValue("x")}); !errdefs.IsAlreadyExists(err) {
		t.Fatalf("duplicate: %v", err)
	}
	up, err := svc.Update(ctx, "team-a", rec.ID, Update{Value: NewValue("v2")})
	if err != nil || up.Version != 2 || len(up.AllowedHosts) != 1 {
		t.Fatalf("update: %+v %v", up, err)
	}
	if r, _ := svc.Resolve(ctx, "team-a", "openai"); r.Value.Reveal() != "v2" || r.Version != 2 {
		t.Fatalf("after update: %v", r)
	}
	if _, err := svc.Delete(ctx, "team-a", "openai"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Resolve(ctx, "team-a", "openai"); !errdefs.IsNotFound(err) {
		t.Fatalf("deleted secret resolved: %v", err)
	}
}

func TestSealBindsTeamAndVersion(t *testing.T) {
	k, err := OpenKeyring(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := k.Seal("a", "sec_1", 1, []byte("v"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Open("b", "sec_1", 1, sealed); err == nil {
		t.Fatal("opened with another team's key")
	}
	if _, err := k.Open("a", "sec_1", 2, sealed); err == nil {
		t.Fatal("opened as another version")
	}
	if v, err := k.Open("a", "sec_1", 1, sealed); err != nil || string(v) != "v" {
		t.Fatalf("open: %q %v", v, err)
	}
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	svc, _, _ := newService(t)
	for _, n := range []New{
		{Name: "", Value: NewValue("v")},
		{Name: "a{b", Value: NewValue("v")},
		{Name: "a}b", Value: NewValue("v")},
		{Name: "a\x01b", Value: NewValue("v")},
		{Name: "a\nb", Value: NewValue("v")},
		{Name: "ok", Value: NewValue(strings.Repeat("x", 1<<20))},
		{Name: "ok", Value: NewValue("")},
		{Name: "ok", Value: NewValue("v"), AllowedHosts: []string{"*"}},
		{Name: "ok", Value: NewValue("v"), AllowedHosts: []string{"a b.com"}},
	} {
		_, err := svc.Create(ctx, "t", n)
		if !errdefs.IsInvalid(err) {
			t.Errorf("create %q (%d bytes): %v, want invalid", n.Name, n.Value.Len(), err)
		}
		if err != nil && n.Value.Len() > 10 && strings.Contains(err.Error(), "xxxxxxxxxx") {
			t.Errorf("error quotes the value")
		}
	}
}

func TestPlaceholders(t *testing.T) {
	s := "Bearer ${e2b.secrets.Token} and ${e2b.secrets.other} ${e2b.secrets.token} ${e2b.secrets.open"
	if got := Names(s); strings.Join(got, ",") != "token,other" {
		t.Fatalf("names %v", got)
	}
	got := Expand(s, func(n string) string { return "<" + n + ">" })
	if got != "Bearer <token> and <other> <token> ${e2b.secrets.open" {
		t.Fatalf("expand %q", got)
	}
	if !HostAllowed([]string{"*.example.com"}, "api.example.com") || HostAllowed([]string{"*.example.com"}, "example.com") ||
		!HostAllowed(nil, "any") || HostAllowed([]string{"a.com"}, "b.com") {
		t.Fatal("host matching")
	}
}
