package store

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

func TestTemplates(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	at := time.Date(2025, 3, 4, 5, 6, 7, 8, time.UTC)
	if err := s.PutTemplate(ctx, Template{Name: "base", Source: "debootstrap:bookworm", CreatedAt: at, SizeBytes: 300 << 20}); err != nil {
		t.Fatalf("PutTemplate: %v", err)
	}
	if err := s.PutTemplate(ctx, Template{Name: "alpine-3.20", Source: "docker.io/library/alpine:3.20", Runtime: "gvisor"}); err != nil {
		t.Fatalf("PutTemplate: %v", err)
	}
	got, err := s.GetTemplate(ctx, "base")
	if err != nil || !reflect.DeepEqual(got, Template{Name: "base", Source: "debootstrap:bookworm", CreatedAt: at, SizeBytes: 300 << 20}) {
		t.Errorf("GetTemplate = %+v, %v", got, err)
	}
	// Put again replaces (a rebuild), its required runtime too.
	if err := s.PutTemplate(ctx, Template{Name: "alpine-3.20", Source: "docker.io/library/alpine:3.20", Runtime: "native"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetTemplate(ctx, "alpine-3.20"); got.Runtime != "native" {
		t.Errorf("runtime after a rebuild = %q, want native", got.Runtime)
	}
	if err := s.PutTemplate(ctx, Template{Name: "alpine-3.20", Source: "docker.io/library/alpine:3.20", Runtime: "gvisor", NoNewPrivileges: true}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetTemplate(ctx, "alpine-3.20"); !got.NoNewPrivileges {
		t.Errorf("no_new_privileges after a rebuild asking for it: %+v", got)
	}
	if err := s.PutTemplate(ctx, Template{Name: "base", Source: "busybox", CreatedAt: at.Add(time.Hour), SizeBytes: 2 << 20}); err != nil {
		t.Fatal(err)
	}
	got, _ = s.GetTemplate(ctx, "base")
	if got.Source != "busybox" || got.SizeBytes != 2<<20 || !got.CreatedAt.Equal(at.Add(time.Hour)) {
		t.Errorf("after upsert: %+v", got)
	}
	list, err := s.ListTemplates(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "alpine-3.20" || list[1].Name != "base" || list[0].Runtime != "gvisor" || list[1].Runtime != "" ||
		!list[0].NoNewPrivileges || list[1].NoNewPrivileges {
		t.Errorf("ListTemplates = %+v, %v", list, err)
	}
	if list[0].CreatedAt.IsZero() {
		t.Error("CreatedAt did not default to now")
	}
	if err := s.DeleteTemplate(ctx, "base"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetTemplate(ctx, "base"); !errdefs.IsNotFound(err) {
		t.Errorf("GetTemplate after delete: %v, want ErrNotFound", err)
	}
	if err := s.DeleteTemplate(ctx, "base"); !errdefs.IsNotFound(err) {
		t.Errorf("DeleteTemplate of a missing template: %v, want ErrNotFound", err)
	}
	for _, bad := range []Template{{Name: ""}, {Name: "../etc"}, {Name: "Base"}, {Name: "ok", SizeBytes: -1}} {
		if err := s.PutTemplate(ctx, bad); !errdefs.IsInvalid(err) {
			t.Errorf("PutTemplate(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
}
