package users

import (
	"os"
	"path/filepath"
	"testing"
)

func TestTemplateDefaults(t *testing.T) {
	db := testDB(t, true)
	db.DefaultsPath = filepath.Join(t.TempDir(), "defaults")
	if got := db.DefaultUser(); got != "user" {
		t.Fatalf("no defaults file: default user %q, want user", got)
	}
	if err := os.WriteFile(db.DefaultsPath, []byte("user=root\nworkdir=/app/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := db.DefaultUser(); got != "root" {
		t.Fatalf("defaults user=root: default user %q", got)
	}
	if d := ReadDefaults(db.DefaultsPath); d.Workdir != "/app" {
		t.Fatalf("workdir %q, want /app", d.Workdir)
	}
	// A recorded user the tree no longer lists falls back to the built-in default.
	if err := os.WriteFile(db.DefaultsPath, []byte("user=ghost\nworkdir=relative\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := db.DefaultUser(); got != "user" {
		t.Fatalf("unknown template user: default user %q, want user", got)
	}
	if d := ReadDefaults(db.DefaultsPath); d.Workdir != "" {
		t.Fatalf("relative workdir kept: %q", d.Workdir)
	}
}
