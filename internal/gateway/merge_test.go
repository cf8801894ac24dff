package gateway

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// nodeList is a node's sandboxes as its list answers them.
func nodeList(t *testing.T, base time.Time, offsets map[string]int) []listed {
	t.Helper()
	type rec struct {
		ID string `json:"sandboxID"`
		At string `json:"startedAt"`
	}
	var recs []rec
	for id, off := range offsets {
		recs = append(recs, rec{id, base.Add(time.Duration(off) * time.Millisecond).Format(time.RFC3339Nano)})
	}
	slices.SortFunc(recs, func(a, b rec) int { return cmpStr(a.At+a.ID, b.At+b.ID) })
	body, _ := json.Marshal(recs)
	out, err := parseListed(listSandboxes, body)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// after keeps a node's records past a cursor, at most limit, as the node's
// paging does (oldest first); more says it held another.
func after(page []listed, cursor string, limit int) ([]listed, bool) {
	return afterIn(page, cursor, limit, false)
}

// afterIn is after in either order: newest, the latest first (page is
// oldest first, as nodeList makes it).
func afterIn(page []listed, cursor string, limit int, newest bool) ([]listed, bool) {
	var out []listed
	for _, l := range page {
		if cursor == "" || pastCursor(l, cursor) != newest && !atCursor(l, cursor) {
			out = append(out, l)
		}
	}
	if newest {
		slices.Reverse(out)
	}
	if len(out) > limit {
		return out[:limit], true
	}
	return out, false
}

// pastCursor is the node's test: (created, id) after the cursor's.
func pastCursor(l listed, cursor string) bool {
	ns, id, _ := strings.Cut(cursor, ".")
	n, _ := strconv.ParseInt(ns, 10, 64)
	at := l.at.UnixNano()
	return at > n || (at == n && l.id > id)
}

// atCursor says whether l is the record the cursor names.
func atCursor(l listed, cursor string) bool {
	return strconv.FormatInt(l.at.UnixNano(), 10)+"."+l.id == cursor
}

func idsOf(page []listed) []string {
	var out []string
	for _, l := range page {
		out = append(out, l.id)
	}
	return out
}

func TestMergePagesAcrossNodes(t *testing.T) {
	base := time.Date(2026, 11, 27, 21, 0, 0, 123456789, time.UTC)
	a := nodeList(t, base, map[string]int{"a1": 1, "a2": 4, "a3": 5, "a4": 9})
	b := nodeList(t, base, map[string]int{"b1": 2, "b2": 3, "b3": 5, "b4": 7})
	want := []string{"a1", "b1", "b2", "a2", "a3", "b3", "b4", "a4"}
	for _, limit := range []int{1, 2, 3, 5, 8, 100} {
		var got []string
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > len(want) {
				t.Fatalf("limit %d: paging does not end", limit)
			}
			pa, moreA := after(a, cursor, limit)
			pb, moreB := after(b, cursor, limit)
			page, next := mergePage(listSandboxes, [][]listed{pa, pb}, limit, moreA || moreB, false)
			if len(page) > limit {
				t.Fatalf("limit %d: page of %d", limit, len(page))
			}
			got = append(got, idsOf(page)...)
			if next == "" {
				break
			}
			var err error
			if cursor, err = decodeToken(next); err != nil {
				t.Fatalf("limit %d: our own token %q: %v", limit, next, err)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("limit %d: pages gave %v, want %v", limit, got, want)
		}
	}
}

// Newest first (E2B's default): the merged pages keep the nodes' order and
// the token carries on through it, while a node gains a sandbox (started
// now: before the walk's position, so not listed) and loses one between
// pages.
func TestMergePagesNewestFirst(t *testing.T) {
	base := time.Date(2026, 11, 27, 21, 0, 0, 123456789, time.UTC)
	for _, limit := range []int{1, 2, 3, 100} {
		a := nodeList(t, base, map[string]int{"a1": 1, "a2": 4, "a3": 5, "a4": 9})
		b := nodeList(t, base, map[string]int{"b1": 2, "b2": 3, "b3": 5, "b4": 7})
		var got []string
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatalf("limit %d: paging does not end", limit)
			}
			pa, moreA := afterIn(a, cursor, limit, true)
			pb, moreB := afterIn(b, cursor, limit, true)
			page, next := mergePage(listSandboxes, [][]listed{pa, pb}, limit, moreA || moreB, true)
			got = append(got, idsOf(page)...)
			if next == "" {
				break
			}
			var err error
			if cursor, err = decodeToken(next); err != nil {
				t.Fatalf("limit %d: our own token %q: %v", limit, next, err)
			}
			if pages == 0 {
				a = append(a, nodeList(t, base, map[string]int{"a9": 60_000})...)
				b = slices.DeleteFunc(b, func(l listed) bool { return l.id == "b2" })
			}
		}
		want := []string{"a4", "b4", "b3", "a3", "a2", "b2", "b1", "a1"}
		if limit <= 5 {
			want = slices.DeleteFunc(want, func(id string) bool { return id == "b2" })
		}
		if !slices.Equal(got, want) {
			t.Errorf("limit %d: pages gave %v, want %v", limit, got, want)
		}
	}
}

func TestMergeTemplatesOncePerName(t *testing.T) {
	parse := func(names ...string) []listed {
		var recs []map[string]string
		for _, n := range names {
			recs = append(recs, map[string]string{"templateID": n})
		}
		b, _ := json.Marshal(recs)
		out, err := parseListed(listTemplates, b)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	page, next := mergePage(listTemplates, [][]listed{parse("base", "py"), parse("base", "go", "node")}, 1, false, false)
	if got := idsOf(page); !slices.Equal(got, []string{"base", "go", "node", "py"}) || next != "" {
		t.Fatalf("templates %v, token %q", got, next)
	}
}

func TestPagingToken(t *testing.T) {
	cur := fmt.Sprintf("%d.%s", time.Now().UnixNano(), "abc")
	got, err := decodeToken(encodeToken(cur))
	if err != nil || got != cur {
		t.Fatalf("round trip: %q, %v", got, err)
	}
	for _, bad := range []string{"abc", "gw1.!!!", encodeToken("x.abc"), encodeToken("12"), encodeToken("12.a/b")} {
		if _, err := decodeToken(bad); err == nil || statusOf(err) != 400 {
			t.Errorf("token %q: %v, want a 400", bad, err)
		}
	}
	if _, err := pageLimit("0"); err == nil {
		t.Error("limit 0 accepted")
	}
	if n, err := pageLimit(""); err != nil || n != defaultPageSize {
		t.Errorf("default limit %d, %v", n, err)
	}
}

func TestMostFreeMemory(t *testing.T) {
	nodes := []Node{
		{Name: "a", Ready: true, FreeMemory: 8 << 30, Templates: []string{"base"}, Runtimes: []string{"native"}},
		{Name: "b", Ready: true, FreeMemory: 16 << 30, Templates: []string{"base", "py"}, Runtimes: []string{"native", "gvisor"}},
		{Name: "c", Ready: false, FreeMemory: 64 << 30, Templates: []string{"base", "py"}},
		{Name: "d", Ready: true, Unschedulable: true, FreeMemory: 64 << 30, Templates: []string{"base"}},
		{Name: "e", Ready: true, FreeMemory: 4 << 30, Templates: []string{"base", "rare"}, Runtimes: []string{"native"}},
	}
	cases := []struct {
		req  PlaceRequest
		want string
	}{
		{PlaceRequest{Template: "base"}, "b"},
		{PlaceRequest{Template: "rare"}, "e"},
		{PlaceRequest{Template: "snapshot-id"}, "b"},
		{PlaceRequest{Template: "base", Runtime: "gvisor"}, "b"},
		{PlaceRequest{Template: "base", MemoryBytes: 12 << 30}, "b"},
	}
	for _, c := range cases {
		n, err := MostFreeMemory{}.Place(t.Context(), c.req, nodes)
		if err != nil || n.Name != c.want {
			t.Errorf("%+v: %s, %v; want %s", c.req, n.Name, err, c.want)
		}
	}
	// A key picks the same node every time, among the eligible ones only.
	first, _ := MostFreeMemory{}.Place(t.Context(), PlaceRequest{Template: "base", IdempotencyKey: "t/k1"}, nodes)
	for range 5 {
		n, err := MostFreeMemory{}.Place(t.Context(), PlaceRequest{Template: "base", IdempotencyKey: "t/k1"}, nodes)
		if err != nil || n.Name != first.Name || n.Name == "c" || n.Name == "d" {
			t.Fatalf("keyed create: %s (first %s), %v", n.Name, first.Name, err)
		}
	}
	spread := map[string]bool{}
	for i := range 40 {
		n, _ := MostFreeMemory{}.Place(t.Context(), PlaceRequest{Template: "base", IdempotencyKey: fmt.Sprintf("t/k%d", i)}, nodes)
		spread[n.Name] = true
	}
	if len(spread) < 2 {
		t.Errorf("40 keys all went to %v", spread)
	}
	if _, err := (MostFreeMemory{}).Place(t.Context(), PlaceRequest{Template: "rare", Runtime: "gvisor"}, nodes); statusOf(err) != 429 {
		t.Errorf("no node fits: %v, want a 429", err)
	}
	if _, err := (MostFreeMemory{}).Place(t.Context(), PlaceRequest{}, nodes[2:3]); statusOf(err) != 503 {
		t.Errorf("no Ready node: %v, want a 503", err)
	}
}
