package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wapi "github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/kube/fleet"
	"github.com/warrenhq/warren/internal/store"
)

// Fleet-wide API keys are Secrets (fleet.LabelAPIKey): the gateway
// authenticates from its watch cache of them and writes them for
// POST/DELETE /api-keys; nodes sync them into their own key tables.
const (
	keyIDLen      = 16                   // as the node's key ids
	keyPrefixLen  = len("e2b_") + 8      // the part of a key shown in lists, as the node's
	maxKeyNameLen = 200                  // as the node's
	adminTeam     = fleet.AdminTeam      // the team allowed to manage keys
	fleetKeyName  = "warren fleet admin" // the name of the fleet's own key
)

// keyStore reads API key Secrets from the cache and writes them through
// the API server.
type keyStore struct {
	cache     client.Reader
	teams     keyTeams // authenticate's lookups (the fleet view's)
	api       client.Client
	namespace string
}

// keyTeams finds the team of a key by its hash.
type keyTeams interface {
	KeyTeam(hash string) (team string, ok bool)
}

// key is an authenticated caller.
type key struct{ team string }

// authenticate finds the Secret of a plaintext key by its hash.
func (s *keyStore) authenticate(plaintext string) (key, error) {
	if plaintext == "" {
		return key{}, fmt.Errorf("missing API key: send it in the X-API-Key header: %w", errdefs.ErrUnauthenticated)
	}
	if team, ok := s.teams.KeyTeam(store.HashKey(plaintext)); ok {
		return key{team: team}, nil
	}
	return key{}, fmt.Errorf("invalid API key: %w", errdefs.ErrUnauthenticated)
}

// create makes a key for team as a Secret named by the key's id and
// returns it with its plaintext, shown this once.
func (s *keyStore) create(ctx context.Context, team, name string) (wapi.APIKey, error) {
	if err := ids.ValidateName("team", team); err != nil {
		return wapi.APIKey{}, err
	}
	if len(name) > maxKeyNameLen || !utf8.ValidString(name) {
		return wapi.APIKey{}, fmt.Errorf("API key name must be valid UTF-8 of at most %d bytes: %w", maxKeyNameLen, errdefs.ErrInvalid)
	}
	plain, err := store.NewKey()
	if err != nil {
		return wapi.APIKey{}, err
	}
	sec := keySecret(ids.New(keyIDLen), s.namespace, team, name, plain)
	if err := s.api.Create(ctx, sec); err != nil {
		return wapi.APIKey{}, fmt.Errorf("write the Secret of API key for team %s: %w", team, kubeErr(err))
	}
	out := keyView(sec)
	out.Key = plain
	return out, nil
}

// keySecret is the Secret of a key, as the fleet contract has it.
func keySecret(id, namespace, team, name, plain string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      id,
			Namespace: namespace,
			Labels:    map[string]string{fleet.LabelAPIKey: "true"},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			fleet.KeyDataHash:   []byte(store.HashKey(plain)),
			fleet.KeyDataTeam:   []byte(team),
			fleet.KeyDataName:   []byte(name),
			fleet.KeyDataPrefix: []byte(plain[:keyPrefixLen]),
		},
	}
}

// keyView is the API's view of a key Secret (never its plaintext).
func keyView(sec *corev1.Secret) wapi.APIKey {
	return wapi.APIKey{
		ID:        sec.Name,
		Team:      string(sec.Data[fleet.KeyDataTeam]),
		Name:      string(sec.Data[fleet.KeyDataName]),
		Prefix:    string(sec.Data[fleet.KeyDataPrefix]),
		CreatedAt: sec.CreationTimestamp.UTC(),
	}
}

// list lists the keys (of team, when not empty) in the node's order:
// creation time, then id.
func (s *keyStore) list(ctx context.Context, team string) ([]wapi.APIKey, error) {
	var secrets corev1.SecretList
	if err := s.cache.List(ctx, &secrets, client.InNamespace(s.namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list API key Secrets: %w", err)
	}
	out := []wapi.APIKey{}
	for i := range secrets.Items {
		k := keyView(&secrets.Items[i])
		if k.Team == "" || (team != "" && k.Team != team) {
			continue
		}
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b wapi.APIKey) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// revoke deletes a key's Secret; nodes drop the key when they sync.
func (s *keyStore) revoke(ctx context.Context, id string) error {
	if id == fleet.FleetAdminSecret {
		return fmt.Errorf("API key %s is the fleet's own (gateway and controllers call nodes with it): %w", id, errdefs.ErrConflict)
	}
	var sec corev1.Secret
	err := s.cache.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: id}, &sec)
	if err != nil {
		return fmt.Errorf("API key %s: %w", id, kubeErr(err))
	}
	if err := s.api.Delete(ctx, &sec); err != nil {
		return fmt.Errorf("revoke API key %s: %w", id, kubeErr(err))
	}
	return nil
}

// ensureFleetKey creates the fleet's admin key Secret unless it exists;
// when several replicas start at once, one create wins.
func ensureFleetKey(ctx context.Context, api client.Client, namespace string) error {
	var sec corev1.Secret
	err := api.Get(ctx, client.ObjectKey{Namespace: namespace, Name: fleet.FleetAdminSecret}, &sec)
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("read Secret %s/%s: %w", namespace, fleet.FleetAdminSecret, kubeErr(err))
	}
	plain, err := store.NewKey()
	if err != nil {
		return err
	}
	fresh := keySecret(fleet.FleetAdminSecret, namespace, adminTeam, fleetKeyName, plain)
	fresh.Data[fleet.KeyDataKey] = []byte(plain)
	if err := api.Create(ctx, fresh); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create Secret %s/%s: %w", namespace, fleet.FleetAdminSecret, kubeErr(err))
	}
	return nil
}

// kubeErr gives an API server error its errdefs kind.
func kubeErr(err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%v: %w", err, errdefs.ErrNotFound)
	case apierrors.IsAlreadyExists(err):
		return fmt.Errorf("%v: %w", err, errdefs.ErrAlreadyExists)
	case apierrors.IsConflict(err):
		return fmt.Errorf("%v: %w", err, errdefs.ErrConflict)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return fmt.Errorf("%v: %w", err, errdefs.ErrInvalid)
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return fmt.Errorf("the gateway's Kubernetes credentials may not do this: %v: %w", err, errdefs.ErrUnavailable)
	}
	return fmt.Errorf("%v: %w", err, errdefs.ErrUnavailable)
}
