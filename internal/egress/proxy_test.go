package egress

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/secrets"
)

type fakeSecrets map[string]secrets.Resolved

func (f fakeSecrets) Resolve(_ context.Context, _ string, name string) (secrets.Resolved, error) {
	r, ok := f[name]
	if !ok {
		return secrets.Resolved{}, fmt.Errorf("secret %s: %w", name, errdefs.ErrNotFound)
	}
	return r, nil
}

// TestFill checks the proxy's decisions on a request's placeholders: put
// in for allowed hosts, refused (and audited) elsewhere, over plain HTTP,
// for unknown secrets and for values a header cannot hold.
func TestFill(t *testing.T) {
	var events []Event
	p := &Proxy{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Audit: func(e Event) { events = append(events, e) },
		Secrets: fakeSecrets{
			"tok": {Name: "tok", Version: 3, AllowedHosts: []string{"*.example.com"}, Value: secrets.NewValue("v-123")},
			"any": {Name: "any", Version: 1, Value: secrets.NewValue("anywhere")},
			"bad": {Name: "bad", Version: 1, Value: secrets.NewValue("a\r\nX-Injected: 1")},
		}}
	for _, c := range []struct {
		header, host string
		secure       bool
		want, reason string
	}{
		{"Bearer ${e2b.secrets.tok}", "api.example.com", true, "Bearer v-123", ""},
		{"${e2b.secrets.any}/${e2b.secrets.TOK}", "api.example.com", true, "anywhere/v-123", ""},
		{"Bearer ${e2b.secrets.tok}", "evil.test", true, "", "host not in allowedHosts"},
		{"Bearer ${e2b.secrets.tok}", "api.example.com", false, "", "plain HTTP"},
		{"${e2b.secrets.gone}", "api.example.com", true, "", "no such secret"},
		{"${e2b.secrets.bad}", "api.example.com", true, "", "value not valid in a header"},
		{"no placeholder", "evil.test", false, "no placeholder", ""},
	} {
		events = nil
		h := http.Header{"X-Key": {c.header}}
		msg := p.fill(context.Background(), "sb1", h, c.host, c.secure)
		if c.reason != "" {
			if msg == "" || len(events) != 1 || events[0].Kind != EventSecretRefused || events[0].Reason != c.reason || events[0].Host != c.host {
				t.Errorf("%q to %s: msg %q events %+v, want refused for %q", c.header, c.host, msg, events, c.reason)
			}
			if strings.Contains(msg, "v-123") || strings.Contains(msg, "anywhere") {
				t.Errorf("the refusal quotes a value: %q", msg)
			}
			continue
		}
		if msg != "" || h.Get("X-Key") != c.want {
			t.Errorf("%q to %s: msg %q header %q, want %q", c.header, c.host, msg, h.Get("X-Key"), c.want)
		}
		for _, e := range events {
			if e.Kind != EventSecretUsed || e.SandboxID != "sb1" {
				t.Errorf("event %+v", e)
			}
		}
	}
}
