package node

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
)

// publishNode writes the node's WarrenNode status, creating the object
// first when it is missing (its spec is the users': only the drain switch).
func (n *Node) publishNode(ctx context.Context) error {
	rep, err := n.cfg.Reporter.Report(ctx)
	if err != nil {
		return fmt.Errorf("report the node's capacity and use: %w", err)
	}
	var wn warrenv1.WarrenNode
	err = n.cfg.Client.Get(ctx, objectKey("", n.cfg.Node), &wn)
	if apierrors.IsNotFound(err) {
		wn = warrenv1.WarrenNode{ObjectMeta: metav1.ObjectMeta{Name: n.cfg.Node}}
		err = n.cfg.Client.Create(ctx, &wn)
	}
	if err != nil {
		return fmt.Errorf("WarrenNode %s: %w", n.cfg.Node, err)
	}
	wn.Status = nodeStatus(wn.Status, rep, n.cfg.Endpoint, n.cfg.Version, time.Now())
	if err := n.cfg.Client.Status().Update(ctx, &wn); err != nil {
		return fmt.Errorf("WarrenNode %s status: %w", n.cfg.Node, err)
	}
	return nil
}

// nodeStatus is the status a report gives, keeping old's conditions'
// transition times while they hold.
func nodeStatus(old warrenv1.WarrenNodeStatus, rep Report, endpoint, version string, now time.Time) warrenv1.WarrenNodeStatus {
	heartbeat := metav1.NewTime(now)
	st := warrenv1.WarrenNodeStatus{
		Endpoint:      endpoint,
		Version:       version,
		Capacity:      resources(rep.Capacity),
		Used:          resources(rep.Used),
		Runtimes:      rep.Runtimes,
		Templates:     rep.Templates,
		Devices:       rep.Devices,
		Snapshots:     warrenv1.SnapshotSummary{Count: rep.SnapshotCount, Bytes: rep.SnapshotBytes},
		LastHeartbeat: &heartbeat,
		Conditions:    old.Conditions,
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: warrenv1.NodeReady, Status: metav1.ConditionTrue, Reason: "Serving",
		Message: "the node serves its API and publishes its sandboxes",
	})
	return st
}

func resources(r Resources) warrenv1.NodeResources {
	return warrenv1.NodeResources{
		Memory:    resource.NewQuantity(r.MemoryBytes, resource.BinarySI),
		CPU:       resource.NewMilliQuantity(r.CPUMillis, resource.DecimalSI),
		Disk:      resource.NewQuantity(r.DiskBytes, resource.BinarySI),
		Sandboxes: r.Sandboxes,
	}
}

// markStopped says on the WarrenNode that the node no longer serves.
func (n *Node) markStopped(ctx context.Context) error {
	var wn warrenv1.WarrenNode
	if err := n.cfg.Client.Get(ctx, objectKey("", n.cfg.Node), &wn); err != nil {
		return fmt.Errorf("WarrenNode %s: %w", n.cfg.Node, err)
	}
	meta.SetStatusCondition(&wn.Status.Conditions, metav1.Condition{
		Type: warrenv1.NodeReady, Status: metav1.ConditionFalse, Reason: "Stopped",
		Message: "warren serve stopped; its sandboxes are left as they were",
	})
	if err := n.cfg.Client.Status().Update(ctx, &wn); err != nil {
		return fmt.Errorf("WarrenNode %s status: %w", n.cfg.Node, err)
	}
	return nil
}
