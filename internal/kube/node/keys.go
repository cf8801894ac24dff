package node

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/kube/fleet"
	"github.com/warrenhq/warren/internal/store"
)

// syncKeys makes the node authenticate exactly the fleet's key Secrets
// (besides its own local keys). A malformed Secret is skipped, not fatal.
func (n *Node) syncKeys(ctx context.Context) error {
	var secrets corev1.SecretList
	if err := n.cfg.Client.List(ctx, &secrets, client.InNamespace(n.cfg.Namespace), client.MatchingLabels{fleet.LabelAPIKey: "true"}); err != nil {
		return fmt.Errorf("list key Secrets: %w", err)
	}
	keys := make([]store.FleetKey, 0, len(secrets.Items))
	for _, s := range secrets.Items {
		if s.DeletionTimestamp != nil {
			continue
		}
		keys = append(keys, keyOf(s))
	}
	skipped, err := n.cfg.Keys.SyncFleetKeys(ctx, keys)
	if err != nil {
		return fmt.Errorf("sync API keys: %w", err)
	}
	// Every pass meets a bad Secret again: say so when the set changes.
	if why := fmt.Sprint(errors.Join(skipped...)); why != n.keysSkipped {
		n.keysSkipped = why
		if len(skipped) > 0 {
			n.log.Warn("node mode: key Secrets skipped", "err", why)
		}
	}
	return nil
}

// keyOf reads a key Secret (contract: data hash, team, name, prefix; the
// Secret's name is the key's id).
func keyOf(s corev1.Secret) store.FleetKey {
	return store.FleetKey{
		ID:     s.Name,
		Team:   string(s.Data[fleet.KeyDataTeam]),
		Name:   string(s.Data[fleet.KeyDataName]),
		Prefix: string(s.Data[fleet.KeyDataPrefix]),
		Hash:   string(s.Data[fleet.KeyDataHash]),
	}
}

// ensureFleetAdmin makes the fleet's admin key Secret when nobody has:
// whoever first finds it missing creates it, and AlreadyExists means
// another node or gateway won the race.
func (n *Node) ensureFleetAdmin(ctx context.Context) error {
	var s corev1.Secret
	err := n.cfg.Client.Get(ctx, objectKey(n.cfg.Namespace, fleet.FleetAdminSecret), &s)
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("read Secret %s: %w", fleet.FleetAdminSecret, err)
	}
	plain, err := store.NewKey()
	if err != nil {
		return err
	}
	s = FleetAdminSecret(n.cfg.Namespace, plain)
	if err := n.cfg.Client.Create(ctx, &s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create Secret %s: %w", fleet.FleetAdminSecret, err)
	}
	return nil
}

// FleetAdminKey reads the fleet's admin key (the plaintext its Secret
// holds), which this node sends to its peers when it pulls a snapshot.
func (n *Node) FleetAdminKey(ctx context.Context) (string, error) {
	var s corev1.Secret
	if err := n.cfg.Client.Get(ctx, objectKey(n.cfg.Namespace, fleet.FleetAdminSecret), &s); err != nil {
		return "", fmt.Errorf("read Secret %s: %v: %w", fleet.FleetAdminSecret, err, errdefs.ErrUnavailable)
	}
	key := string(s.Data[fleet.KeyDataKey])
	if key == "" {
		return "", fmt.Errorf("the Secret %s holds no %q: %w", fleet.FleetAdminSecret, fleet.KeyDataKey, errdefs.ErrUnavailable)
	}
	return key, nil
}

// FleetAdminSecret is the Secret of the fleet's admin key plain.
func FleetAdminSecret(namespace, plain string) corev1.Secret {
	return corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: fleet.FleetAdminSecret, Namespace: namespace,
			Labels: map[string]string{fleet.LabelAPIKey: "true", fleet.LabelTeam: fleet.AdminTeam}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			fleet.KeyDataHash:   []byte(store.HashKey(plain)),
			fleet.KeyDataTeam:   []byte(fleet.AdminTeam),
			fleet.KeyDataName:   []byte("fleet admin"),
			fleet.KeyDataPrefix: []byte(plain[:12]),
			fleet.KeyDataKey:    []byte(plain),
		},
	}
}
