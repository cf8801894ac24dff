package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
)

// Template is the stored record of a template (a root filesystem sandboxes
// are created from).
type Template struct {
	Name      string
	Source    string // what it was built from: an image reference, a path, "debootstrap:bookworm"…
	CreatedAt time.Time
	SizeBytes int64
	// Runtime is the runtime every sandbox made from the template runs on
	// ("" = any). The store does not check the name: runtimes are the
	// daemon's business.
	Runtime string
	// NoNewPrivileges starts every sandbox of the template with
	// no_new_privs: sudo and other setuid binaries give nothing (the
	// server's --no-new-privileges does so for every template).
	NoNewPrivileges bool
	// Devices are the host devices (CDI names) its sandboxes get when
	// their create asks for none.
	Devices []string
}

// PutTemplate creates or replaces a template's record (a rebuild replaces
// it). CreatedAt defaults to now.
func (s *templateTable) PutTemplate(ctx context.Context, t Template) error {
	if err := ids.ValidateName("template name", t.Name); err != nil {
		return err
	}
	if t.SizeBytes < 0 {
		return fmt.Errorf("template %s: size %d is negative: %w", t.Name, t.SizeBytes, errdefs.ErrInvalid)
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = time.Now()
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO templates (name, source, created_at, size_bytes, runtime, no_new_privileges, devices)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET source = excluded.source,
			created_at = excluded.created_at, size_bytes = excluded.size_bytes, runtime = excluded.runtime,
			no_new_privileges = excluded.no_new_privileges, devices = excluded.devices`,
		t.Name, t.Source, toNanos(t.CreatedAt), t.SizeBytes, t.Runtime, t.NoNewPrivileges, strings.Join(t.Devices, ","))
	if err != nil {
		return fmt.Errorf("put template %s: %w", t.Name, dbErr(err))
	}
	return nil
}

// GetTemplate returns one template, or ErrNotFound.
func (s *templateTable) GetTemplate(ctx context.Context, name string) (Template, error) {
	row := s.r.QueryRowContext(ctx, `SELECT name, source, created_at, size_bytes, runtime, no_new_privileges, devices FROM templates WHERE name = ?`, name)
	t, err := scanTemplate(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Template{}, fmt.Errorf("template %s: %w", name, errdefs.ErrNotFound)
	}
	if err != nil {
		return Template{}, fmt.Errorf("get template %s: %w", name, dbErr(err))
	}
	return t, nil
}

// ListTemplates returns every template, by name.
func (s *templateTable) ListTemplates(ctx context.Context) ([]Template, error) {
	return queryAll(ctx, s.r, "list templates", scanTemplate, `SELECT name, source, created_at, size_bytes, runtime, no_new_privileges, devices FROM templates ORDER BY name`)
}

// DeleteTemplate removes a template's record, or returns ErrNotFound.
func (s *templateTable) DeleteTemplate(ctx context.Context, name string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM templates WHERE name = ?`, name)
	return oneRow(res, err, "delete template", name)
}

func scanTemplate(sc scanner) (Template, error) {
	var t Template
	var created int64
	var devices string
	if err := sc.Scan(&t.Name, &t.Source, &created, &t.SizeBytes, &t.Runtime, &t.NoNewPrivileges, &devices); err != nil {
		return Template{}, err
	}
	if devices != "" {
		// CDI names hold no commas.
		t.Devices = strings.Split(devices, ",")
	}
	t.CreatedAt = fromNanos(created)
	return t, nil
}
