// Package template builds templates: read-only volumes holding a root
// filesystem that sandboxes are snapshotted from.
//
// A build fills a scratch volume from one source (a rootfs directory or
// tarball, debootstrap, an OCI image, or the host's busybox), applies the
// sandbox conventions (Prepare), and snapshots it read-only into
// templates/<name>. The scratch volume is deleted whatever happens, so a
// failed build leaves nothing behind and a replaced template stays usable
// until its successor is complete.
package template

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/storage"
)

// Builder builds templates into a storage pool.
type Builder struct {
	Storage storage.Storage
	Log     *slog.Logger
	// CacheDir keeps reusable build inputs (debootstrap trees as
	// tarballs). Empty disables caching.
	CacheDir string
	// Mirror is the Debian mirror for debootstrap; empty means
	// DefaultMirror.
	Mirror string
	// Busybox is the host's static busybox binary; empty means
	// DefaultBusybox.
	Busybox string
}

// Source says what a template is built from. Exactly one of RootFS,
// Debootstrap, Image and Busybox is set.
type Source struct {
	// RootFS is a directory or a tarball (.tar, .tar.gz; detected by
	// content) on the host.
	RootFS string
	// Debootstrap is a Debian suite, e.g. "bookworm".
	Debootstrap string
	// Image is an OCI image: a registry reference, a docker-archive
	// tarball path, or an OCI layout directory path.
	Image string
	// ImageAuth is the registry login Image is pulled with (nil: the
	// host's docker keychain).
	ImageAuth *RegistryAuth
	// Busybox builds a minimal tree from the host's static busybox.
	Busybox bool
	// Packages are extra packages for debootstrap.
	Packages []string
}

// BuildOptions tunes Build.
type BuildOptions struct {
	// Replace builds over an existing template; the old one stays usable
	// until the new one is complete.
	Replace bool
	// Progress receives human-readable progress lines; nil discards them.
	Progress io.Writer
}

// Info describes a built template.
type Info struct {
	Name      string
	Source    string // human-readable, e.g. "debootstrap bookworm"
	Created   time.Time
	SizeBytes int64
}

// Build builds template name from src.
func (b *Builder) Build(ctx context.Context, name string, src Source, opts BuildOptions) (Info, error) {
	if err := ids.ValidateName("template name", name); err != nil {
		return Info{}, err
	}
	if err := src.Validate(); err != nil {
		return Info{}, err
	}
	if b.Storage == nil {
		return Info{}, fmt.Errorf("template builder has no storage: %w", errdefs.ErrInvalid)
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	progress = &lockedWriter{w: progress}
	log := b.logger().With("template", name)

	key := storage.Key{Kind: storage.KindTemplate, Name: name}
	_, err := b.Storage.Stat(ctx, key)
	exists := err == nil
	switch {
	case err != nil && !errdefs.IsNotFound(err):
		return Info{}, fmt.Errorf("template %s: %w", name, err)
	case exists && !opts.Replace:
		return Info{}, fmt.Errorf("template %s exists (rebuild it with replace): %w", name, errdefs.ErrAlreadyExists)
	}

	start := time.Now()
	scratch := scratchKey(name)
	root, err := b.Storage.Create(ctx, scratch)
	if err != nil {
		return Info{}, fmt.Errorf("template %s: create scratch volume: %w", name, err)
	}
	// Teardown runs even if ctx is cancelled: nothing half-made stays.
	cleanupCtx := context.WithoutCancel(ctx)
	defer func() {
		if err := b.Storage.Delete(cleanupCtx, scratch); err != nil {
			log.Warn("template: scratch volume not deleted; it is removed at the next start", "volume", scratch.String(), "err", err)
		}
	}()

	fmt.Fprintf(progress, "template %s: building from %s\n", name, src.String())
	if err := b.populate(ctx, root, src, progress, log); err != nil {
		return Info{}, fmt.Errorf("template %s: %w", name, err)
	}
	fmt.Fprintf(progress, "template %s: tree ready in %s; applying sandbox conventions\n", name, time.Since(start).Round(time.Millisecond))
	if err := Prepare(root); err != nil {
		return Info{}, fmt.Errorf("template %s: prepare: %w", name, err)
	}
	size, err := treeSize(ctx, root)
	if err != nil {
		return Info{}, fmt.Errorf("template %s: measure: %w", name, err)
	}
	snapCtx := ctx
	if exists {
		// Replace: the old template served until the new tree was whole.
		// From here on a cancelled ctx must not leave no template at all.
		snapCtx = cleanupCtx
		if err := b.Storage.Delete(cleanupCtx, key); err != nil && !errdefs.IsNotFound(err) {
			return Info{}, fmt.Errorf("template %s: delete the old template: %w", name, err)
		}
	}
	fmt.Fprintf(progress, "template %s: snapshotting\n", name)
	if _, err := b.Storage.Snapshot(snapCtx, scratch, key, storage.SnapshotOptions{ReadOnly: true}); err != nil {
		if exists {
			return Info{}, fmt.Errorf("template %s: snapshot the built tree (the old template is already removed; build again): %w", name, err)
		}
		return Info{}, fmt.Errorf("template %s: snapshot the built tree: %w", name, err)
	}
	info := Info{Name: name, Source: src.String(), Created: time.Now().UTC(), SizeBytes: size}
	log.Info("template built", "source", info.Source, "bytes", size, "took", time.Since(start).Round(time.Millisecond))
	fmt.Fprintf(progress, "template %s: done in %s (%d MB)\n", name, time.Since(start).Round(time.Millisecond), size>>20)
	return info, nil
}

// populate fills root from src.
func (b *Builder) populate(ctx context.Context, root string, src Source, progress io.Writer, log *slog.Logger) error {
	switch {
	case src.RootFS != "":
		return populateRootFS(ctx, root, src.RootFS, log)
	case src.Debootstrap != "":
		return b.populateDebootstrap(ctx, root, src, progress, log)
	case src.Image != "":
		return populateImage(ctx, root, src.Image, src.ImageAuth, progress, log)
	case src.Busybox:
		return populateBusybox(ctx, root, b.busyboxPath())
	}
	return fmt.Errorf("no source: %w", errdefs.ErrInvalid)
}

// scratchKey names a build's scratch volume <name>-<random>, shortening
// the name so the key stays within ids.MaxLen.
func scratchKey(name string) storage.Key {
	const suffix = 9 // "-" + 8 random characters
	if len(name) > ids.MaxLen-suffix {
		name = name[:ids.MaxLen-suffix]
	}
	return storage.Key{Kind: storage.KindScratch, Name: name + "-" + ids.New(suffix-1)}
}

func (b *Builder) logger() *slog.Logger {
	if b.Log != nil {
		return b.Log
	}
	return slog.New(slog.DiscardHandler)
}
