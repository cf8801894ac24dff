package store

import (
	"context"
	"testing"
	"time"
)

// A build's memory snapshot and runtime (migration 66) round-trip.
func TestTemplateBuildMemorySnapshot(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	tmpl, err := s.EnsureBuiltTemplate(ctx, "team1", "web", "tpl1")
	if err != nil {
		t.Fatal(err)
	}
	b := TemplateBuild{ID: "b1", TemplateID: tmpl.ID, Status: "ready", SnapshotID: "s1", CreatedAt: time.Now().UTC(),
		MemorySnapshotID: "m1", Runtime: "gvisor"}
	if err := s.PutTemplateBuild(ctx, b); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTemplateBuild(ctx, tmpl.ID, "b1")
	if err != nil || got.MemorySnapshotID != "m1" || got.Runtime != "gvisor" {
		t.Fatalf("got %+v, %v", got, err)
	}
}
