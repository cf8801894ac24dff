package server

import (
	"bytes"
	"net/http"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/storage/treediff"
)

// contentDiff makes a unified diff of one changed text file, within the
// request's byte budget; "" when either side is not a small text file.
func (s *snapshotRoutes) contentDiff(res session.DiffResult, c storage.Change, budget *int) string {
	read := func(side string) ([]byte, bool) {
		if (side == res.From && c.Kind == storage.ChangeAdded) || (side == res.To && c.Kind == storage.ChangeRemoved) {
			return nil, true // that side has no file: diff against empty
		}
		b, ok, err := s.snapshots.ReadForDiff(side, c.Path, maxContentDiffFile)
		if err != nil || !ok || bytes.IndexByte(b, 0) >= 0 {
			return nil, false
		}
		return b, true
	}
	a, ok := read(res.From)
	if !ok {
		return ""
	}
	b, ok := read(res.To)
	if !ok {
		return ""
	}
	d := treediff.UnifiedDiff(a, b, treediff.DisplayPath("a"+c.Path), treediff.DisplayPath("b"+c.Path), 3)
	if len(d) > *budget {
		return ""
	}
	*budget -= len(d)
	return d
}

func (s *snapshotRoutes) lineage(w http.ResponseWriter, r *http.Request) {
	l, err := s.snapshots.Lineage(r.Context(), teamOf(r), r.PathValue("id"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := client.Lineage{Family: l.Family, Template: l.Template, Nodes: []client.LineageNode{}, Edges: []client.LineageEdge{}}
	known := map[string]bool{l.Template: true}
	out.Nodes = append(out.Nodes, client.LineageNode{ID: l.Template, Type: "template", State: "ready"})
	for _, sb := range l.Sandboxes {
		known[sb.ID] = true
		out.Nodes = append(out.Nodes, client.LineageNode{ID: sb.ID, Type: "sandbox", State: string(sb.State), CreatedAt: sb.CreatedAt, Head: sb.Head})
	}
	for _, sn := range l.Snapshots {
		known[sn.ID] = true
		out.Nodes = append(out.Nodes, client.LineageNode{ID: sn.ID, Type: "snapshot", State: string(sn.State), Name: sn.Name, Kind: string(sn.Kind), Turn: sn.Turn, CreatedAt: sn.CreatedAt})
	}
	for _, e := range l.Edges {
		// Sandboxes that were deleted keep a node so that edges stay whole.
		for _, id := range []string{e.From, e.To} {
			if !known[id] {
				known[id] = true
				out.Nodes = append(out.Nodes, client.LineageNode{ID: id, Type: "sandbox", State: "destroyed"})
			}
		}
		out.Edges = append(out.Edges, client.LineageEdge{Kind: string(e.Kind), From: e.From, To: e.To, At: e.At})
	}
	writeJSON(w, http.StatusOK, out)
}
