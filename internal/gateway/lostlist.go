package gateway

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
)

// A Lost sandbox is on no Ready node, so no node's list holds it; the
// gateway lists it from its Sandbox object, as GET by id answers it, so
// that a list does not hide a sandbox a connect can still restore. It
// takes its place in the merge by its start time and id like any other.

// lostListed is the Lost sandboxes of team among lost that a sandbox
// list with query q shows after cursor (a node cursor, "" for the first
// page), in the list's order. The nodes checked q's filters before this runs. A state filter
// leaves them out: it names states a node holds (a node refuses "lost").
// A Lost sandbox of a node that is Ready again is that node's to list.
func lostListed(lost []*warrenv1.Sandbox, q url.Values, team, cursor string, newest bool, ready []Node) []listed {
	if len(q["state"]) > 0 {
		return nil
	}
	md, _ := url.ParseQuery(q.Get("metadata"))
	var startedAfter time.Time
	if v := q.Get("startedAfter"); v != "" {
		startedAfter, _ = time.Parse(time.RFC3339Nano, v)
	}
	answered := map[string]bool{}
	for _, n := range ready {
		answered[n.Name] = true
	}
	var out []listed
	for _, sb := range lost {
		id := sb.Status.SandboxID
		if id == "" || answered[sb.Status.Node] || teamOfSandbox(sb) != team || !lostMatches(sb, md, q.Get("template")) {
			continue
		}
		rec := lostRecord(id, sb)
		if !rec.StartedAt.After(startedAfter) && !startedAfter.IsZero() {
			continue
		}
		l := listed{at: rec.StartedAt, id: id}
		if cursor != "" && !pastNodeCursor(l, cursor, newest) {
			continue
		}
		l.raw, _ = json.Marshal(rec)
		out = append(out, l)
	}
	return out
}

// lostMatches applies a list's metadata (every pair) and template filters.
func lostMatches(sb *warrenv1.Sandbox, md url.Values, template string) bool {
	if template != "" && sb.Spec.Template != template {
		return false
	}
	for k, v := range md {
		if got, ok := sb.Spec.Metadata[k]; !ok || got != v[0] {
			return false
		}
	}
	return true
}

// pastNodeCursor says whether l comes after the node cursor
// "<unix nanos>.<id>" in the list's order, as a node pages.
func pastNodeCursor(l listed, cursor string, newest bool) bool {
	ns, id, _ := strings.Cut(cursor, ".")
	n, _ := strconv.ParseInt(ns, 10, 64)
	at := l.at.UnixNano()
	c := 0
	switch {
	case at < n:
		c = -1
	case at > n:
		c = 1
	default:
		c = strings.Compare(l.id, id)
	}
	if newest {
		return c < 0
	}
	return c > 0
}
