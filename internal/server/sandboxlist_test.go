package server

import (
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

func TestSandboxFilterOf(t *testing.T) {
	at := time.Date(2025, 6, 1, 12, 0, 0, 500_000_000, time.UTC)
	for _, tc := range []struct {
		query string
		want  store.SandboxFilter
	}{
		{"", store.SandboxFilter{Newest: true}},
		{"order=desc", store.SandboxFilter{Newest: true}},
		{"order=asc", store.SandboxFilter{}},
		// As the SDK sends them: Date.toISOString, states comma-joined.
		{"startedAfter=2025-06-01T12:00:00.500Z&order=asc", store.SandboxFilter{StartedAfter: at}},
		{"startedAfter=2025-06-01T14:00:00.5%2B02:00", store.SandboxFilter{Newest: true, StartedAfter: at}},
		{"template=base", store.SandboxFilter{Newest: true, Template: "base"}},
		{"state=running,paused", store.SandboxFilter{Newest: true, States: []store.SandboxState{"running", "paused", "hibernated"}}},
		{"state=running&state=paused", store.SandboxFilter{Newest: true, States: []store.SandboxState{"running", "paused", "hibernated"}}},
		{"metadata=" + url.QueryEscape("run=r1&name=a%20b"), store.SandboxFilter{Newest: true, Metadata: map[string]string{"run": "r1", "name": "a b"}}},
		{"nextToken=1748779200000000000.abc123", store.SandboxFilter{Newest: true, After: "1748779200000000000.abc123"}},
	} {
		q, err := url.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sandboxFilterOf(q)
		if err != nil {
			t.Errorf("%q: %v", tc.query, err)
			continue
		}
		if !got.StartedAfter.Equal(tc.want.StartedAfter) {
			t.Errorf("%q: startedAfter %v, want %v", tc.query, got.StartedAfter, tc.want.StartedAfter)
		}
		got.StartedAfter, tc.want.StartedAfter = time.Time{}, time.Time{}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %+v, want %+v", tc.query, got, tc.want)
		}
	}
}

// Bad values are a 400 that names the parameter, never an empty list.
func TestSandboxFilterOfRefuses(t *testing.T) {
	for _, query := range []string{
		"order=newest", "order=ASC", "order=%20",
		"startedAfter=yesterday", "startedAfter=2025-06-01", "startedAfter=1748779200",
		"template=" + url.QueryEscape("../etc"), "template=Base", "template=" + url.QueryEscape("a b"),
		"state=sleeping", "state=running,",
		"nextToken=garbage!", "nextToken=abc123", "nextToken=x.abc", "nextToken=-5.abc", "nextToken=12.", "nextToken=12.ABC",
		"nextToken=" + url.QueryEscape("12.a/../b"), "nextToken=gw1.MTIuYWJj",
		"metadata=" + url.QueryEscape("a=%zz"),
	} {
		q, err := url.ParseQuery(query)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sandboxFilterOf(q); !errdefs.IsInvalid(err) {
			t.Errorf("%q: %v, want ErrInvalid", query, err)
		}
	}
}
