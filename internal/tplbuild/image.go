package tplbuild

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/template"
)

// imageTemplatePrefix starts the names of the server templates made from
// registry images (image-<40 hex of the digest>). They hold a team's
// private pull: no API call lists them or creates a sandbox from them by
// name; only builds reach them, after the registry said the builder may
// read that digest.
const imageTemplatePrefix = "image-"

// ImageTemplateName is the server template an image digest
// ("sha256:<hex>") is unpacked into.
func ImageTemplateName(digest string) string {
	_, hex, _ := strings.Cut(digest, ":")
	return imageTemplatePrefix + hex[:min(40, len(hex))]
}

// IsImageTemplate tells whether name is a template made from an image
// (hidden from listings and creates by name).
func IsImageTemplate(name string) bool {
	hex, ok := strings.CutPrefix(name, imageTemplatePrefix)
	if !ok || len(hex) != 40 {
		return false
	}
	return strings.Trim(hex, "0123456789abcdef") == ""
}

// registryConfig is the SDK's fromImageRegistry. Only "registry" (basic
// auth) is served; the cloud registries need their providers' token
// exchanges.
type registryConfig struct {
	Type     string `json:"type"`
	Username string `json:"username"`
	Password string `json:"password"`
}

// image is the OCI image the spec starts from ("" for a template) and
// the login it is pulled with.
func (s Spec) image() (string, *template.RegistryAuth, error) {
	if s.FromImage == "" || s.FromImage == sdkDefaultImage || s.FromTemplate != "" {
		if len(bytes.TrimSpace(s.FromImageRegistry)) > 0 && string(bytes.TrimSpace(s.FromImageRegistry)) != "null" {
			return "", nil, fmt.Errorf("fromImageRegistry without fromImage: %w", errdefs.ErrInvalid)
		}
		return "", nil, nil
	}
	// A path would make the server read its own files: only references.
	if strings.HasPrefix(s.FromImage, "/") || strings.HasPrefix(s.FromImage, ".") {
		return "", nil, fmt.Errorf("fromImage %q: want a registry reference (host/repo:tag or @sha256:...), not a path: %w", s.FromImage, errdefs.ErrInvalid)
	}
	if _, err := name.ParseReference(s.FromImage); err != nil {
		return "", nil, fmt.Errorf("fromImage %q is not an image reference: %v: %w", s.FromImage, err, errdefs.ErrInvalid)
	}
	raw := bytes.TrimSpace(s.FromImageRegistry)
	if len(raw) == 0 || string(raw) == "null" {
		return s.FromImage, nil, nil
	}
	var rc registryConfig
	if err := json.Unmarshal(raw, &rc); err != nil {
		return "", nil, fmt.Errorf("fromImageRegistry: %v: %w", err, errdefs.ErrInvalid)
	}
	switch rc.Type {
	case "registry":
		if rc.Username == "" || rc.Password == "" {
			return "", nil, fmt.Errorf("fromImageRegistry of type registry: want both username and password: %w", errdefs.ErrInvalid)
		}
		return s.FromImage, &template.RegistryAuth{Username: rc.Username, Password: rc.Password}, nil
	case "aws", "gcp":
		return "", nil, fmt.Errorf("fromImageRegistry of type %q is not supported: pull from a registry with a username and password (type registry): %w", rc.Type, errdefs.ErrInvalid)
	}
	return "", nil, fmt.Errorf("fromImageRegistry type %q: want registry: %w", rc.Type, errdefs.ErrInvalid)
}

// resolveTimeout bounds asking the registry for an image's digest.
const resolveTimeout = time.Minute

// BuildImageFunc builds the server template name from an image source
// (the daemon's template builder), writing progress lines.
type BuildImageFunc func(ctx context.Context, name string, src template.Source, progress io.Writer) error

// imageTemplate resolves ref to its digest with auth and makes (or
// reuses) the template of that digest: a second build of the same
// digest pulls no layer. It returns the template and its cache key.
func (s *Service) imageTemplate(ctx context.Context, ref string, auth *template.RegistryAuth, l *buildLog) (string, string, error) {
	if s.cfg.BuildImage == nil {
		return "", "", fmt.Errorf("fromImage: this server builds no images: %w", errdefs.ErrUnsupported)
	}
	// A registry that never answers fails the build in a minute, not at
	// the build's timeout.
	rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	d, err := template.ImageDigest(rctx, ref, auth)
	cancel()
	if err != nil {
		return "", "", err
	}
	digest := d.DigestStr()
	tmpl := ImageTemplateName(digest)
	unlock, err := s.images.LockContext(ctx, tmpl) // one pull per digest at a time
	if err != nil {
		return "", "", err
	}
	defer unlock()
	if _, err := s.cfg.Store.GetTemplate(ctx, tmpl); err == nil {
		l.add("info", "base", "Image %s is %s: unpacked already, nothing to pull", ref, digest)
		return tmpl, "image:" + digest, nil
	} else if !errdefs.IsNotFound(err) {
		return "", "", err
	}
	l.add("info", "base", "Pulling image %s (%s)", ref, digest)
	if err := s.cfg.BuildImage(ctx, tmpl, template.Source{Image: d.String(), ImageAuth: auth}, &logWriter{l: l, step: "base"}); err != nil {
		return "", "", fmt.Errorf("unpack image %s: %w", ref, err)
	}
	return tmpl, "image:" + digest, nil
}

// logWriter turns written lines into build log entries.
type logWriter struct {
	l    *buildLog
	step string
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.l.output("info", w.step, string(p))
	return len(p), nil
}
