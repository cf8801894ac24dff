package node

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/warrenhq/warren/internal/kube/fleet"
)

// renewLease creates the node's Lease or renews it: the controllers take a
// Lease not renewed within its duration for a lost node.
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
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != n.cfg.Node || acquired == nil {
		acquired = &now
	}
	lease.Spec = n.leaseSpec(now)
	lease.Spec.AcquireTime = acquired
	if err := n.cfg.Client.Update(ctx, &lease); err != nil {
		return fmt.Errorf("renew Lease %s: %w", key, err)
	}
	return nil
}

func (n *Node) leaseSpec(now metav1.MicroTime) coordinationv1.LeaseSpec {
	return coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To(n.cfg.Node),
		LeaseDurationSeconds: ptr.To(int32(n.cfg.LeaseDuration / time.Second)),
		RenewTime:            &now,
	}
}
