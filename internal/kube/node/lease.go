package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/kube/fleet"
)

// Two daemons started with the same --node-name would both publish the
// node's sandboxes and fight over its objects. Each daemon holds the
// node's Lease under an identity of its own (the name and a random
// suffix, new each start), so a start can tell a Lease some other daemon
// renews from one its own earlier run left: it waits, up to the Lease's
// duration, for the holder either to renew (another live daemon: refused)
// or to let it lapse (a daemon killed without stopping: taken). A daemon
// that stops releases it, so a restart does not wait.

// newIdentity is a Lease holder identity unique to this start of node.
func newIdentity(node string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return node + "_" + hex.EncodeToString(b)
}

// leaseHolder is the Lease's holder and when its term ends.
func leaseHolder(l *coordinationv1.Lease) (holder string, renewed, ends time.Time) {
	holder = ptr.Deref(l.Spec.HolderIdentity, "")
	if l.Spec.RenewTime != nil {
		renewed = l.Spec.RenewTime.Time
	}
	return holder, renewed, renewed.Add(time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0)) * time.Second)
}

// claimLease takes the node's Lease at start: at once when no other
// identity holds it or its term is over, else once the term lapses
// without a renewal; a renewal meanwhile is another daemon of this name.
func (n *Node) claimLease(ctx context.Context) error {
	key := objectKey(n.cfg.Namespace, fleet.LeaseName(n.cfg.Node))
	var first time.Time
	for {
		var lease coordinationv1.Lease
		err := n.cfg.Client.Get(ctx, key, &lease)
		if apierrors.IsNotFound(err) {
			return n.renewLease(ctx)
		}
		if err != nil {
			return fmt.Errorf("read Lease %s: %w", key, err)
		}
		holder, renewed, ends := leaseHolder(&lease)
		if holder == "" || holder == n.identity || time.Now().After(ends) {
			return n.renewLease(ctx)
		}
		switch {
		case first.IsZero():
			first = renewed
			n.log.Info("the node's Lease is held by another identity: waiting for its term to lapse (a daemon of this node that was killed) or to be renewed (another daemon with this --node-name)",
				"lease", key.Name, "holder", holder, "until", ends)
		case !renewed.Equal(first):
			return fmt.Errorf("another warren daemon (%s) is running as node %s: it renews Lease %s/%s (last %s ago); give this one another --node-name, or stop that one: %w",
				holder, n.cfg.Node, key.Namespace, key.Name, time.Since(renewed).Round(time.Millisecond), errdefs.ErrConflict)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for Lease %s held by %s to lapse: %w", key, holder, ctx.Err())
		case <-time.After(min(n.cfg.LeaseDuration/10, time.Second)):
		}
	}
}

// renewLease creates the node's Lease or renews it: the controllers take a
// Lease not renewed within its duration for a lost node. It leaves alone
// a Lease another daemon holds and renews.
func (n *Node) renewLease(ctx context.Context) error {
	now := metav1.NewMicroTime(time.Now())
	var lease coordinationv1.Lease
	key := objectKey(n.cfg.Namespace, fleet.LeaseName(n.cfg.Node))
	err := n.cfg.Client.Get(ctx, key, &lease)
	if apierrors.IsNotFound(err) {
		lease = coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Labels: map[string]string{fleet.LabelNode: n.cfg.Node}},
			Spec:       n.leaseSpec(now),
		}
		lease.Spec.AcquireTime = &now
		if err := n.cfg.Client.Create(ctx, &lease); err != nil {
			return fmt.Errorf("create Lease %s: %w", key, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read Lease %s: %w", key, err)
	}
	acquired := lease.Spec.AcquireTime
	if holder, _, ends := leaseHolder(&lease); holder != n.identity || acquired == nil {
		if holder != "" && holder != n.identity && now.Time.Before(ends) {
			return fmt.Errorf("not renewed: Lease %s is held by %s, another daemon running as node %s: %w", key, holder, n.cfg.Node, errdefs.ErrConflict)
		}
		acquired = &now
	}
	lease.Spec = n.leaseSpec(now)
	lease.Spec.AcquireTime = acquired
	if err := n.cfg.Client.Update(ctx, &lease); err != nil {
		return fmt.Errorf("renew Lease %s: %w", key, err)
	}
	return nil
}

// releaseLease lets the next start of the node take the Lease at once. Its
// renew time stays: the node is not lost while its term runs.
func (n *Node) releaseLease(ctx context.Context) error {
	var lease coordinationv1.Lease
	key := objectKey(n.cfg.Namespace, fleet.LeaseName(n.cfg.Node))
	if err := n.cfg.Client.Get(ctx, key, &lease); err != nil {
		return fmt.Errorf("read Lease %s: %w", key, err)
	}
	if ptr.Deref(lease.Spec.HolderIdentity, "") != n.identity {
		return nil
	}
	lease.Spec.HolderIdentity = nil
	if err := n.cfg.Client.Update(ctx, &lease); err != nil {
		return fmt.Errorf("release Lease %s: %w", key, err)
	}
	return nil
}

func (n *Node) leaseSpec(now metav1.MicroTime) coordinationv1.LeaseSpec {
	return coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To(n.identity),
		LeaseDurationSeconds: ptr.To(int32(n.cfg.LeaseDuration / time.Second)),
		RenewTime:            &now,
	}
}
