package session

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// A command whose agent connection broke is explained by how its sandbox
// stopped, and only for its own team.
func TestStoppedDuringCommand(t *testing.T) {
	ctx := context.Background()
	m, _, _ := newManager(t, 10)
	began := time.Now()
	running, err := m.Create(ctx, CreateRequest{Team: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.StoppedDuringCommand(ctx, "a", running.ID, began); err != nil {
		t.Errorf("running sandbox: %v, want nil (the break is the agent's own)", err)
	}
	if err := m.StoppedDuringCommand(ctx, "a", "nosuchsandbox0000000", began); err != nil {
		t.Errorf("a sandbox that never was: %v, want nil", err)
	}

	paused, err := m.Create(ctx, CreateRequest{Team: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Pause(ctx, "a", paused.ID); err != nil {
		t.Fatal(err)
	}
	err = m.StoppedDuringCommand(ctx, "a", paused.ID, began)
	if !errdefs.IsConflict(err) || !strings.Contains(err.Error(), "was paused while the command ran (an API call asked for it)") {
		t.Errorf("paused sandbox: %v, want a conflict saying it was paused by a call", err)
	}

	rec, err := m.Get(ctx, "a", running.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.destroy(ctx, rec, CauseTimeout); err != nil {
		t.Fatal(err)
	}
	err = m.StoppedDuringCommand(ctx, "a", running.ID, began)
	if !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), "was killed while the command ran (its timeout ran out)") {
		t.Errorf("sandbox killed by its timeout: %v, want not found with the reason", err)
	}
	if err := m.StoppedDuringCommand(ctx, "b", running.ID, began); err != nil {
		t.Errorf("another team's sandbox: %v, want nil (nothing told)", err)
	}
}

// A command cut by a forced rollback says so; one begun after it is not
// blamed on it.
func TestCommandCutByRollback(t *testing.T) {
	ctx := context.Background()
	m, _, _ := newManager(t, 10)
	sb, err := m.Create(ctx, CreateRequest{Team: "a"})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := m.Snapshot(ctx, "a", sb.ID, SnapshotRequest{Name: "s"})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if _, err := m.Rollback(ctx, "a", sb.ID, snap.ID, RollbackOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	err = m.StoppedDuringCommand(ctx, "a", sb.ID, before)
	if !errdefs.IsConflict(err) || !strings.Contains(err.Error(), "was rolled back to snapshot "+snap.ID+" while the command ran") {
		t.Errorf("command cut by a rollback: %v, want a conflict naming the rollback", err)
	}
	if err := m.StoppedDuringCommand(ctx, "a", sb.ID, time.Now()); err != nil {
		t.Errorf("command begun after the rollback: %v, want nil", err)
	}
	if err := m.StoppedDuringCommand(ctx, "b", sb.ID, before); err != nil {
		t.Errorf("another team's sandbox: %v, want nil", err)
	}
}
