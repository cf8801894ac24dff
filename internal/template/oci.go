package template

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Whiteout markers of the OCI layer format.
const (
	whiteoutPrefix = ".wh."
	whiteoutOpaque = ".wh..wh..opq"
)

// populateImage applies the layers of an OCI image, in order, to root.
func populateImage(ctx context.Context, root, ref string, auth *RegistryAuth, progress io.Writer, log *slog.Logger) error {
	img, err := openImage(ctx, ref, auth)
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return fmt.Errorf("image %s: read layers: %w", ref, wrapRemote(err))
	}
	t, err := openTree(root)
	if err != nil {
		return err
	}
	defer t.Close()
	x := &extractor{t: t, log: log}
	for i, l := range layers {
		digest, _ := l.Digest()
		size, _ := l.Size()
		fmt.Fprintf(progress, "image: layer %d/%d %s (%d KB)\n", i+1, len(layers), digest, size>>10)
		if err := applyLayer(ctx, x, l); err != nil {
			return fmt.Errorf("image %s: layer %d (%s): %w", ref, i+1, digest, err)
		}
	}
	x.finish()
	return writeImageEnv(t, img)
}

// openImage finds the image ref names: an OCI layout directory, a
// docker-archive tarball, or else a registry reference.
func openImage(ctx context.Context, ref string, auth *RegistryAuth) (v1.Image, error) {
	fi, err := os.Stat(ref)
	if strings.Contains(ref, "@sha256:") {
		// A digest reference (a pull a build resolved) is never a path:
		// a team's image name must not make the server read its files.
		err = os.ErrNotExist
	}
	switch {
	case err == nil && fi.IsDir():
		if _, err := os.Stat(filepath.Join(ref, "oci-layout")); err != nil {
			return nil, fmt.Errorf("image directory %s has no oci-layout file (expected an OCI image layout): %w", ref, errdefs.ErrInvalid)
		}
		idx, err := layout.ImageIndexFromPath(ref)
		if err != nil {
			return nil, fmt.Errorf("read OCI layout %s: %v: %w", ref, err, errdefs.ErrInvalid)
		}
		return pickImage(idx, ref)
	case err == nil:
		img, err := tarball.ImageFromPath(ref, nil)
		if err != nil {
			return nil, fmt.Errorf("read docker archive %s (one image, as `docker save` writes): %v: %w", ref, err, errdefs.ErrInvalid)
		}
		return img, nil
	case strings.HasPrefix(ref, "/") || strings.HasPrefix(ref, "."):
		return nil, fmt.Errorf("image path %s does not exist: %w", ref, errdefs.ErrNotFound)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("image %q is neither a path nor a valid reference: %v: %w", ref, err, errdefs.ErrInvalid)
	}
	img, err := remote.Image(r,
		remote.WithContext(ctx),
		auth.option(),
		remote.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}))
	if err != nil {
		return nil, fmt.Errorf("pull image %s: %w", ref, registryError(err))
	}
	return img, nil
}

// pickImage chooses the image for this host from an index: the only one,
// or the one for linux/GOARCH; nested indexes are searched.
func pickImage(idx v1.ImageIndex, ref string) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("image %s: read index: %v: %w", ref, err, errdefs.ErrInvalid)
	}
	var candidates []v1.Descriptor
	for _, d := range m.Manifests {
		switch d.MediaType {
		case types.OCIImageIndex, types.DockerManifestList:
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, fmt.Errorf("image %s: read nested index: %v: %w", ref, err, errdefs.ErrInvalid)
			}
			if img, err := pickImage(child, ref); err == nil {
				return img, nil
			}
		case types.OCIManifestSchema1, types.DockerManifestSchema2:
			if d.Platform == nil || (d.Platform.OS == "linux" && d.Platform.Architecture == runtime.GOARCH) {
				candidates = append(candidates, d)
			}
		}
	}
	if len(candidates) == 0 {
		return nil, fmt.Errorf("image %s holds no image for linux/%s: %w", ref, runtime.GOARCH, errdefs.ErrNotFound)
	}
	// Several matches (tags of the same platform): the first, as tools do.
	img, err := idx.Image(candidates[0].Digest)
	if err != nil {
		return nil, fmt.Errorf("image %s: %v: %w", ref, err, errdefs.ErrInvalid)
	}
	return img, nil
}

// wrapRemote marks registry failures as unavailable unless they already
// carry a kind.
func wrapRemote(err error) error {
	for _, k := range []error{errdefs.ErrInvalid, errdefs.ErrNotFound, errdefs.ErrUnavailable, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, k) {
			return err
		}
	}
	return fmt.Errorf("%v: %w", err, errdefs.ErrUnavailable)
}

// applyLayer applies one layer: whiteouts delete what lower layers made,
// everything else is extracted like any tar entry. Entries this layer
// writes are remembered so that an opaque marker, wherever it sits in the
// stream, hides only the lower layers' content.
func applyLayer(ctx context.Context, x *extractor, l v1.Layer) error {
	rc, err := l.Uncompressed()
	if err != nil {
		return wrapRemote(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	written := map[string]bool{}
	for n := 0; ; n++ {
		if n%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read layer entry %d: %v: %w", n, err, errdefs.ErrInvalid)
		}
		rel, err := cleanRel(hdr.Name)
		if err != nil {
			return err
		}
		dir, base := path.Split(rel)
		dir = orDot(strings.TrimSuffix(dir, "/"))
		switch {
		case base == whiteoutOpaque:
			if err := clearLower(x.t, dir, written); err != nil {
				return err
			}
		case strings.HasPrefix(base, whiteoutPrefix):
			victim := strings.TrimPrefix(base, whiteoutPrefix)
			if victim == "" || victim == "." || victim == ".." {
				return fmt.Errorf("bad whiteout %q: %w", hdr.Name, errdefs.ErrInvalid)
			}
			if err := x.t.removeAll(path.Join(dir, victim)); err != nil {
				return err
			}
		default:
			if err := x.put(hdr, tr); err != nil {
				return err
			}
			written[rel] = true
		}
	}
}

// clearLower removes what is under directory rel except what the current
// layer wrote (descending into directories it wrote, whose older content
// is hidden too).
func clearLower(t *tree, rel string, written map[string]bool) error {
	fd, err := t.openIn(rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err == unix.ENOENT || err == unix.ENOTDIR {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opaque directory /%s: %w", rel, err)
	}
	defer unix.Close(fd)
	names, err := readDirNames(fd)
	if err != nil {
		return err
	}
	for _, n := range names {
		child := path.Join(rel, n)
		if rel == "." {
			child = n
		}
		if written[child] {
			var st unix.Stat_t
			if unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
				if err := clearLower(t, child, written); err != nil {
					return err
				}
			}
			continue
		}
		if err := removeAt(fd, n); err != nil {
			return fmt.Errorf("opaque directory /%s: remove %s: %w", rel, n, err)
		}
	}
	return nil
}
