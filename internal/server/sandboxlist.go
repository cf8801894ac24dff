package server

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/store"
)

// sandboxFilterOf reads the filters and order of GET /v2/sandboxes (and
// GET /sandboxes) as E2B's SDK sends them: metadata as one url-encoded
// k=v&… string, state repeated or comma-separated, startedAfter in RFC
// 3339, template by id (warren's template ids are their names), order
// asc|desc (default desc: the latest started first) and nextToken, the
// X-Next-Token of the previous page.
func sandboxFilterOf(q url.Values) (store.SandboxFilter, error) {
	var f store.SandboxFilter
	var err error
	if f.Newest, err = newestFirst(q.Get("order")); err != nil {
		return f, err
	}
	if f.After, err = pageToken(q.Get("nextToken")); err != nil {
		return f, err
	}
	if f.States, err = sandboxStates(q["state"]); err != nil {
		return f, err
	}
	if f.Metadata, err = metadataFilter(q.Get("metadata")); err != nil {
		return f, err
	}
	if v := q.Get("startedAfter"); v != "" {
		if f.StartedAfter, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return f, fmt.Errorf("startedAfter %q is not an RFC 3339 time (like 2025-06-01T12:00:00Z): %w", v, errdefs.ErrInvalid)
		}
	}
	if v := q.Get("template"); v != "" {
		if ids.ValidateName("template", v) != nil {
			return f, fmt.Errorf("template %q is not a template id or name (lowercase letters, digits, '.', '-', '_'): %w", v, errdefs.ErrInvalid)
		}
		f.Template = v
	}
	return f, nil
}

// newestFirst reads order: desc (the default, as E2B's) or asc.
func newestFirst(order string) (bool, error) {
	switch order {
	case "", "desc":
		return true, nil
	case "asc":
		return false, nil
	}
	return false, fmt.Errorf("order %q: want asc (oldest start first) or desc (newest first, the default): %w", order, errdefs.ErrInvalid)
}

// pageToken checks a nextToken: the X-Next-Token of an earlier page, the
// start time and id of the last sandbox it listed ("<unix nanos>.<id>").
// A bare id (which the store takes too) is refused here: it would look up
// a sandbox of any team, and tell whether it exists.
func pageToken(tok string) (string, error) {
	if tok == "" {
		return "", nil
	}
	ns, id, _ := strings.Cut(tok, ".")
	if n, err := strconv.ParseInt(ns, 10, 64); err != nil || n < 0 || ids.Validate("nextToken", id) != nil {
		return "", fmt.Errorf("nextToken %q is not a paging token: pass the X-Next-Token header of the previous page as it came: %w", tok, errdefs.ErrInvalid)
	}
	return tok, nil
}

// sandboxStates reads state filters: repeated, comma-separated or both.
func sandboxStates(values []string) ([]store.SandboxState, error) {
	var out []store.SandboxState
	for _, v := range values {
		for _, one := range strings.Split(v, ",") {
			switch store.SandboxState(one) {
			case session.StatePaused:
				// E2B's paused is ours or hibernated: both wait for a resume.
				out = append(out, session.StatePaused, session.StateHibernated)
			case session.StateRunning, session.StateHibernated, session.StateCreating, session.StateStopped, session.StateFailed:
				out = append(out, store.SandboxState(one))
			default:
				return nil, fmt.Errorf("state %q: want running, paused, hibernated, creating, stopped or failed: %w", one, errdefs.ErrInvalid)
			}
		}
	}
	return out, nil
}

// metadataFilter reads E2B's metadata filter: one url-encoded query string,
// k1=v1&k2=v2; every pair must match.
func metadataFilter(md string) (map[string]string, error) {
	if md == "" {
		return nil, nil
	}
	vals, err := url.ParseQuery(md)
	if err != nil {
		return nil, fmt.Errorf("metadata %q is not k=v pairs: %w", md, errdefs.ErrInvalid)
	}
	out := map[string]string{}
	for k, v := range vals {
		out[k] = v[0]
	}
	return out, nil
}
