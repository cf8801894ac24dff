package node

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
)

// watchSandboxes nudges the sandbox sync whenever a Sandbox object
// assigned to the node changes, so that an applied or deleted object is
// acted on at once rather than at the next poll. The poll stays the
// backstop: a watch that fails or ends is made again after a pause, and
// nothing is missed meanwhile. Without a watching client it does nothing.
func (n *Node) watchSandboxes(ctx context.Context) {
	wc, ok := n.cfg.Client.(client.WithWatch)
	if !ok {
		return
	}
	n.loops.Add(1)
	go func() {
		defer n.loops.Done()
		for ctx.Err() == nil {
			w, err := wc.Watch(ctx, &warrenv1.SandboxList{}, client.InNamespace(n.cfg.Namespace),
				client.MatchingFields{"spec.nodeName": n.cfg.Node})
			if err == nil {
				for range w.ResultChan() {
					n.nudgeSandboxes()
				}
				w.Stop()
			}
			if !sleep(ctx, time.Second) {
				return
			}
		}
	}()
}

// nudgeSandboxes asks the sandbox sync alone to run soon.
func (n *Node) nudgeSandboxes() {
	select {
	case n.sandbox <- struct{}{}:
	default:
	}
}
