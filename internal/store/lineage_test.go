package store

import (
	"context"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

func TestLineage(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	at := time.Date(2025, 2, 3, 4, 5, 6, 7, time.UTC)
	edges := []LineageEdge{
		{Family: "root1", Kind: EdgeCreatedFrom, From: "root1", To: "base-1.0", At: at},
		{Family: "root1", Kind: EdgeSnapshotOf, From: "snap1", To: "root1"},
		{Family: "other", Kind: EdgeCreatedFrom, From: "other", To: "base"},
		{Family: "root1", Kind: EdgeForkedFrom, From: "fork1", To: "snap1"},
		{Family: "root1", Kind: EdgeRolledBackTo, From: "root1", To: "snap1"},
		{Family: "root1", Kind: EdgePromotedFrom, From: "root1", To: "fork1"},
	}
	before := time.Now()
	for _, e := range edges {
		if err := s.AddLineageEdge(ctx, e); err != nil {
			t.Fatalf("AddLineageEdge(%+v): %v", e, err)
		}
	}
	got, err := s.ListLineage(ctx, "root1")
	if err != nil {
		t.Fatal(err)
	}
	want := []EdgeKind{EdgeCreatedFrom, EdgeSnapshotOf, EdgeForkedFrom, EdgeRolledBackTo, EdgePromotedFrom}
	if len(got) != len(want) {
		t.Fatalf("ListLineage(root1) = %+v, want %d edges", got, len(want))
	}
	for i, e := range got {
		if e.Kind != want[i] || e.Family != "root1" || (i > 0 && e.ID <= got[i-1].ID) {
			t.Errorf("edge %d = %+v, want kind %s, ids increasing", i, e, want[i])
		}
	}
	if !got[0].At.Equal(at) || got[0].To != "base-1.0" {
		t.Errorf("first edge = %+v, want At %v and To base-1.0", got[0], at)
	}
	if got[1].At.Before(before) {
		t.Errorf("defaulted At = %v, want about now", got[1].At)
	}
	if l, err := s.ListLineage(ctx, "nobody"); err != nil || len(l) != 0 {
		t.Errorf("ListLineage of an unknown family = %v, %v; want none", l, err)
	}
	for name, e := range map[string]LineageEdge{
		"bad family": {Family: "A", Kind: EdgeSnapshotOf, From: "a", To: "b"},
		"bad kind":   {Family: "f", Kind: "copied", From: "a", To: "b"},
		"no from":    {Family: "f", Kind: EdgeSnapshotOf, To: "b"},
		"bad to":     {Family: "f", Kind: EdgeSnapshotOf, From: "a", To: "../b"},
	} {
		if err := s.AddLineageEdge(ctx, e); !errdefs.IsInvalid(err) {
			t.Errorf("%s: AddLineageEdge = %v, want ErrInvalid", name, err)
		}
	}
}
