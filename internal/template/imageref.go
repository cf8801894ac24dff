package template

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/warrenhq/warren/internal/errdefs"
)

// RegistryAuth is a registry login (basic auth) for one pull. It is
// never logged: only the image reference is.
type RegistryAuth struct {
	Username string
	Password string
}

// option is how remote calls authenticate: with the login when given,
// else with the host's docker keychain.
func (a *RegistryAuth) option() remote.Option {
	if a == nil {
		return remote.WithAuthFromKeychain(authn.DefaultKeychain)
	}
	return remote.WithAuth(&authn.Basic{Username: a.Username, Password: a.Password})
}

// ImageDigest resolves a registry reference to the digest it names now
// (a tag moves; a digest does not), asking the registry with auth: the
// answer proves the caller may read that image. It fetches the manifest
// only, no layer.
func ImageDigest(ctx context.Context, ref string, auth *RegistryAuth) (name.Digest, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return name.Digest{}, fmt.Errorf("image %q is not a valid reference: %v: %w", ref, err, errdefs.ErrInvalid)
	}
	desc, err := remote.Get(r, remote.WithContext(ctx), auth.option())
	if err != nil {
		return name.Digest{}, fmt.Errorf("resolve image %s: %w", ref, registryError(err))
	}
	return r.Context().Digest(desc.Digest.String()), nil
}

// registryError gives a registry's refusal its kind: 401/403 is
// permission denied, 404 not found, anything else unavailable.
func registryError(err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("%v: %w", err, errdefs.ErrPermissionDenied)
		case http.StatusNotFound:
			return fmt.Errorf("%v: %w", err, errdefs.ErrNotFound)
		}
	}
	return wrapRemote(err)
}
