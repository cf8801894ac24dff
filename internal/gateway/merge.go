package gateway

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Paging of fanned-out lists. Every node orders sandboxes by start time
// (newest first unless order=asc) and snapshots by creation time, then id,
// and pages with a cursor "<unix nanos>.<id>" that it accepts whether or
// not it holds that record. The merged list keeps that order, so one
// cursor — the last record the client saw — says where the next page
// starts on every node; the gateway's token wraps it.

const (
	defaultPageSize = 100  // as the node's
	maxListLimit    = 1000 // as the node's
	tokenPrefix     = "gw1."
)

// pageLimit reads ?limit= (1..maxListLimit; default 100), as the node.
func pageLimit(v string) (int, error) {
	if v == "" {
		return defaultPageSize, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxListLimit {
		return 0, fmt.Errorf("limit %q: want 1..%d: %w", v, maxListLimit, errdefs.ErrInvalid)
	}
	return n, nil
}

// encodeToken wraps a node cursor in the gateway's opaque paging token.
func encodeToken(cursor string) string {
	return tokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(cursor))
}

// decodeToken unwraps a paging token into the node cursor it holds; ""
// is the first page.
func decodeToken(tok string) (string, error) {
	if tok == "" {
		return "", nil
	}
	bad := fmt.Errorf("nextToken %q is not a paging token of this gateway: pass the X-Next-Token of the previous page: %w", tok, errdefs.ErrInvalid)
	rest, ok := strings.CutPrefix(tok, tokenPrefix)
	if !ok {
		return "", bad
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return "", bad
	}
	ns, id, ok := strings.Cut(string(b), ".")
	if _, err := strconv.ParseInt(ns, 10, 64); !ok || err != nil || id == "" || strings.ContainsAny(id, "/?&#") {
		return "", bad
	}
	return string(b), nil
}

// listed is one record of a node's list and the key it is ordered by.
type listed struct {
	at  time.Time
	id  string
	raw json.RawMessage
}

// cursor is the node's paging cursor just after l.
func (l listed) cursor() string { return strconv.FormatInt(l.at.UnixNano(), 10) + "." + l.id }

// recordKey reads the fields a kind of list is ordered by: a sandbox's
// startedAt (the node's started_at, to the nanosecond), a snapshot's
// createdAt.
type recordKey struct {
	SandboxID  string    `json:"sandboxID"`
	StartedAt  time.Time `json:"startedAt"`
	SnapshotID string    `json:"snapshotID"`
	CreatedAt  time.Time `json:"createdAt"`
	TemplateID string    `json:"templateID"`
}

// parseListed reads one node's answer to a list.
func parseListed(kind listKind, body []byte) ([]listed, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(body, &raws); err != nil {
		return nil, fmt.Errorf("a node's list is not a JSON array: %w", err)
	}
	out := make([]listed, 0, len(raws))
	for _, raw := range raws {
		var k recordKey
		if err := json.Unmarshal(raw, &k); err != nil {
			return nil, fmt.Errorf("a node's list holds a malformed record: %w", err)
		}
		l := listed{raw: raw}
		switch kind {
		case listSandboxes:
			l.at, l.id = k.StartedAt, k.SandboxID
		case listSnapshots:
			l.at, l.id = k.CreatedAt, k.SnapshotID
		case listTemplates:
			l.id = k.TemplateID
		}
		out = append(out, l)
	}
	return out, nil
}

// mergePage merges the nodes' pages (in node order) into one page of at
// most limit records in the node's order (newest: the latest first); more
// says a record follows it on some node (a node that said so, or records
// left over). Templates are the fleet's, listed once each by name, unpaged.
func mergePage(kind listKind, pages [][]listed, limit int, more, newest bool) (page []listed, next string) {
	var all []listed
	seen := map[string]bool{}
	for _, p := range pages {
		for _, l := range p {
			if kind == listTemplates {
				if seen[l.id] {
					continue
				}
				seen[l.id] = true
			}
			all = append(all, l)
		}
	}
	slices.SortStableFunc(all, func(a, b listed) int {
		c := a.at.Compare(b.at)
		if c == 0 {
			c = strings.Compare(a.id, b.id)
		}
		if newest {
			return -c
		}
		return c
	})
	if kind == listTemplates {
		return all, ""
	}
	if len(all) > limit {
		all, more = all[:limit], true
	}
	if more && len(all) > 0 {
		next = encodeToken(all[len(all)-1].cursor())
	}
	return all, next
}

// rawArray encodes records as the JSON array a node answers.
func rawArray(page []listed) []byte {
	out := make([]json.RawMessage, 0, len(page))
	for _, l := range page {
		out = append(out, l.raw)
	}
	b, _ := json.Marshal(out)
	return b
}
