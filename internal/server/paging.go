package server

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/warrenhq/warren/internal/errdefs"
)

const (
	defaultPageSize = 100
	maxListLimit    = 1000
)

// pageLimit reads ?limit= (1..maxListLimit; default 100).
func pageLimit(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return defaultPageSize, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxListLimit {
		return 0, fmt.Errorf("limit %q: want 1..%d: %w", v, maxListLimit, errdefs.ErrInvalid)
	}
	return n, nil
}

// writePage answers a list request with one page: it fetches one item more
// than the page to learn whether another page follows, and if so names its
// start in the X-Next-Token header (E2B's paging).
func writePage[T interface{ Cursor() string }, J any](w http.ResponseWriter, r *http.Request, limit int,
	fetch func(limit int) ([]T, error), conv func(T) J) {
	items, err := fetch(limit + 1)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if len(items) > limit {
		items = items[:limit]
		w.Header().Set("X-Next-Token", items[limit-1].Cursor())
	}
	out := make([]J, 0, len(items))
	for _, it := range items {
		out = append(out, conv(it))
	}
	writeJSON(w, http.StatusOK, out)
}

// afterParam reads `after`, the id of the last record a client has seen
// (0 when absent), of the history endpoints (events, tool calls, network
// events).
func afterParam(r *http.Request) (int64, error) {
	v := r.URL.Query().Get("after")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("after %q: want the id of a record: %w", v, errdefs.ErrInvalid)
	}
	return n, nil
}
