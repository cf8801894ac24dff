package store

import (
	"context"
	"fmt"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
)

// EdgeKind is how two nodes of a family's lineage graph (sandboxes,
// snapshots, templates) are related. An edge points from the newer thing to
// what it came from.
type EdgeKind string

const (
	EdgeSnapshotOf   EdgeKind = "snapshot-of"    // snapshot → the sandbox it was taken of
	EdgeForkedFrom   EdgeKind = "forked-from"    // sandbox → the snapshot it was forked from
	EdgeRolledBackTo EdgeKind = "rolled-back-to" // sandbox → the snapshot its tree was reset to
	EdgePromotedFrom EdgeKind = "promoted-from"  // sandbox → the fork whose tree it took
	EdgeCreatedFrom  EdgeKind = "created-from"   // sandbox → the template or snapshot it was created from
	EdgeMergedFrom   EdgeKind = "merged-from"    // sandbox → the fork or snapshot whose changes it merged
)

// Valid reports whether k is one of the known kinds.
func (k EdgeKind) Valid() bool {
	switch k {
	case EdgeSnapshotOf, EdgeForkedFrom, EdgeRolledBackTo, EdgePromotedFrom, EdgeCreatedFrom, EdgeMergedFrom:
		return true
	}
	return false
}

// LineageEdge is one event in a family's history. Edges are only ever
// added, so a family's tree can be drawn even after its sandboxes and
// snapshots are gone.
type LineageEdge struct {
	ID       int64 // assigned by AddLineageEdge; increases with every edge
	Family   string
	Kind     EdgeKind
	From, To string // ids, or a template name for To of created-from
	At       time.Time
}

// AddLineageEdge records an edge. ID is assigned (the one given is
// ignored); At defaults to now.
func (s *historyTables) AddLineageEdge(ctx context.Context, e LineageEdge) error {
	return insertEdge(ctx, s.w, e)
}

func insertEdge(ctx context.Context, ex execer, e LineageEdge) error {
	if err := ids.Validate("family", e.Family); err != nil {
		return fmt.Errorf("lineage edge: %w", err)
	}
	if !e.Kind.Valid() {
		return fmt.Errorf("lineage edge: unknown kind %q: %w", e.Kind, errdefs.ErrInvalid)
	}
	// Names are a superset of ids, and To may be a template's name.
	if err := ids.ValidateName("lineage edge source", e.From); err != nil {
		return err
	}
	if err := ids.ValidateName("lineage edge target", e.To); err != nil {
		return err
	}
	if e.At.IsZero() {
		e.At = time.Now()
	}
	_, err := ex.ExecContext(ctx, `INSERT INTO lineage_edges (family, kind, from_id, to_id, at) VALUES (?, ?, ?, ?, ?)`,
		e.Family, string(e.Kind), e.From, e.To, toNanos(e.At))
	if err != nil {
		return fmt.Errorf("add %s edge %s → %s: %w", e.Kind, e.From, e.To, dbErr(err))
	}
	return nil
}

// ListLineage returns a family's edges in the order they were added (an
// unknown family has none).
func (s *historyTables) ListLineage(ctx context.Context, family string) ([]LineageEdge, error) {
	if err := ids.Validate("family", family); err != nil {
		return nil, err
	}
	return queryAll(ctx, s.r, "list lineage of family "+family, scanEdge,
		`SELECT id, family, kind, from_id, to_id, at FROM lineage_edges WHERE family = ? ORDER BY id`, family)
}

func scanEdge(sc scanner) (LineageEdge, error) {
	var e LineageEdge
	var kind string
	var at int64
	err := sc.Scan(&e.ID, &e.Family, &kind, &e.From, &e.To, &at)
	e.Kind, e.At = EdgeKind(kind), fromNanos(at)
	return e, err
}
