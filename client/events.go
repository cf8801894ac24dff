package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// SandboxEvent is one step of a sandbox's life (GET /sandboxes/{id}/events).
type SandboxEvent struct {
	ID int64     `json:"id"`
	At time.Time `json:"at"`
	// Kind is created, paused, hibernated, resumed, rolled-back,
	// timed-out, failed, destroyed or reattached.
	Kind string `json:"kind"`
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// Cause is api, timeout, error, restart or pool.
	Cause  string `json:"cause"`
	Detail string `json:"detail,omitempty"`
}

// Events returns a sandbox's history after event id after (0 = all).
func (s *SandboxesService) Events(ctx context.Context, id string, after int64) ([]SandboxEvent, error) {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	p := sandboxPath(id, "/events")
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var out []SandboxEvent
	err := s.t.call(ctx, request{method: http.MethodGet, path: p}, &out)
	return out, err
}
