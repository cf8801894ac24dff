package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/devices"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/store"
	"github.com/warrenhq/warren/internal/template"
)

// Templates keeps the template volumes and their records together. The
// volumes are the truth: a record without a volume is dropped, a volume
// without a record gets one.
type Templates struct {
	Storage storage.Storage
	Store   *store.Store
	Builder *template.Builder
	Log     *slog.Logger
}

// List returns every template.
func (t *Templates) List(ctx context.Context) ([]store.Template, error) {
	return t.Store.ListTemplates(ctx)
}

// Delete removes a template. Sandboxes made from it keep their own copies.
func (t *Templates) Delete(ctx context.Context, name string) error {
	if err := ids.ValidateName("template", name); err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx)
	verr := t.Storage.Delete(ctx, storage.Key{Kind: storage.KindTemplate, Name: name})
	serr := t.Store.DeleteTemplate(ctx, name)
	if errdefs.IsNotFound(verr) && errdefs.IsNotFound(serr) {
		return fmt.Errorf("template %q: %w", name, errdefs.ErrNotFound)
	}
	if verr != nil && !errdefs.IsNotFound(verr) {
		return verr
	}
	if serr != nil && !errdefs.IsNotFound(serr) {
		return serr
	}
	return nil
}

// BuildOptions says how to build a template beyond its source.
type BuildOptions struct {
	// Replace rebuilds a template that exists (its record too: a rebuild
	// without Runtime drops a runtime the old build required).
	Replace bool
	// Runtime is the runtime every sandbox of the template must run on
	// ("" = any).
	Runtime string
	// NoNewPrivileges starts every sandbox of the template with
	// no_new_privs (no sudo).
	NoNewPrivileges bool
	// Devices are the host devices (CDI names) its sandboxes get when
	// their create asks for none; checked against the host's specs at
	// each create.
	Devices  []string
	Progress io.Writer
}

// Build builds a template and records it.
func (t *Templates) Build(ctx context.Context, name string, src template.Source, opts BuildOptions) (store.Template, error) {
	if err := devices.CheckNames(opts.Devices); err != nil {
		return store.Template{}, err
	}
	if opts.Runtime != "" {
		// Checked before the build, which may take minutes.
		if err := config.ValidateRuntime("template runtime", opts.Runtime); err != nil {
			return store.Template{}, err
		}
	}
	info, err := t.Builder.Build(ctx, name, src, template.BuildOptions{Replace: opts.Replace, Progress: opts.Progress})
	if err != nil {
		return store.Template{}, err
	}
	rec := store.Template{Name: info.Name, Source: info.Source, CreatedAt: info.Created, SizeBytes: info.SizeBytes, Runtime: opts.Runtime, NoNewPrivileges: opts.NoNewPrivileges, Devices: opts.Devices}
	if err := t.Store.PutTemplate(ctx, rec); err != nil {
		return store.Template{}, fmt.Errorf("record template: %w", err)
	}
	return rec, nil
}

// Ensure builds the template `name` from src if it does not exist yet.
func (t *Templates) Ensure(ctx context.Context, name string, src template.Source, progress io.Writer) error {
	if _, err := t.Storage.Stat(ctx, storage.Key{Kind: storage.KindTemplate, Name: name}); err == nil {
		return nil
	} else if !errdefs.IsNotFound(err) {
		return err
	}
	t.Log.Info("building template on first use (debootstrap takes a few minutes; cached afterwards)", "template", name)
	_, err := t.Build(ctx, name, src, BuildOptions{Progress: progress})
	if errdefs.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// buildImage unpacks a registry image into the template name for a
// fromImage build (tplbuild): made once per digest, kept like any other.
func (t *Templates) buildImage(ctx context.Context, name string, src template.Source, progress io.Writer) error {
	_, err := t.Build(ctx, name, src, BuildOptions{Progress: progress})
	if errdefs.IsAlreadyExists(err) {
		return nil // a volume a crash left before its record: Reconcile records it
	}
	return err
}

// Reconcile makes the records match the volumes.
func (t *Templates) Reconcile(ctx context.Context) error {
	vols, err := t.Storage.List(ctx, storage.KindTemplate)
	if err != nil {
		return err
	}
	recs, err := t.Store.ListTemplates(ctx)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, v := range vols {
		have[v.Key.Name] = true
	}
	var errs []error
	known := map[string]bool{}
	for _, r := range recs {
		known[r.Name] = true
		if !have[r.Name] {
			t.Log.Warn("template record without a volume; dropping it", "template", r.Name)
			errs = append(errs, t.Store.DeleteTemplate(ctx, r.Name))
		}
	}
	for _, v := range vols {
		if !known[v.Key.Name] {
			errs = append(errs, t.Store.PutTemplate(ctx, store.Template{Name: v.Key.Name, Source: "found on disk", SizeBytes: -1}))
		}
	}
	return errors.Join(errs...)
}

// noNewPrivileges says whether a sandbox of template starts with
// no_new_privs: when the server says so for all, or the template's record
// does. A record that cannot be read counts as yes: sudo failing is the
// safe way to be wrong.
func noNewPrivileges(server bool, st *store.Store, template string, log *slog.Logger) bool {
	if server {
		return true
	}
	t, err := st.GetTemplate(context.Background(), template)
	if errdefs.IsNotFound(err) {
		return false
	}
	if err != nil {
		log.Warn("could not read the template's no_new_privileges; starting the sandbox with it", "template", template, "err", err)
		return true
	}
	return t.NoNewPrivileges
}
