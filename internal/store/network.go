package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
)

// NetworkPolicy is a sandbox's egress policy as stored. Its fields mirror
// internal/network's Policy (which checks them); the store only keeps them.
type NetworkPolicy struct {
	AllowInternetAccess bool     `json:"allowInternetAccess"`
	AllowOut            []string `json:"allowOut,omitempty"`
	DenyOut             []string `json:"denyOut,omitempty"`
	// Rules are E2B's network rules: per domain, header transforms.
	Rules map[string][]NetworkRule `json:"rules,omitempty"`
	// EgressProxy mirrors internal/network's EgressProxy.
	EgressProxy *NetworkEgressProxy `json:"egressProxy,omitempty"`
}

// NetworkEgressProxy is a SOCKS5 upstream. Its password is kept so that a
// restarted daemon can tunnel again; no API answer carries it. With a
// NetworkSealer the row holds it sealed (SealedPassword) and Password is
// filled from it as the row is read; rows written before (or without a
// sealer) hold Password in clear and still read.
type NetworkEgressProxy struct {
	Address  string `json:"address"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// SealedPassword is the stored form only: a versioned prefix ("v1:")
	// then the ciphertext. Callers set and read Password.
	SealedPassword string `json:"sealedPassword,omitempty"`
}

// NetworkSealer seals SOCKS5 passwords at rest (internal/secrets' Keyring).
type NetworkSealer interface {
	SealProxyPassword(password string) (string, error)
	OpenProxyPassword(sealed string) (string, error)
}

var errNoSealer = errors.New("this store has no key to open sealed SOCKS5 passwords")

// SetNetworkSealer makes the store seal SOCKS5 passwords from now on. Call
// it once, before the store is used.
func (s *Store) SetNetworkSealer(ns NetworkSealer) { s.conns.sealer = ns }

// sealed is p as its row keeps it: the password sealed when there is a
// sealer. p itself is not changed (the caller's record keeps the clear one).
func sealed(p *NetworkPolicy, seal NetworkSealer) (*NetworkPolicy, error) {
	if p == nil || p.EgressProxy == nil || p.EgressProxy.Password == "" || seal == nil {
		return p, nil
	}
	ep := *p.EgressProxy
	var err error
	if ep.SealedPassword, err = seal.SealProxyPassword(ep.Password); err != nil {
		return nil, fmt.Errorf("seal the SOCKS5 password: %w", err)
	}
	ep.Password = ""
	cp := *p
	cp.EgressProxy = &ep
	return &cp, nil
}

// NetworkRule mirrors internal/network's Rule.
type NetworkRule struct {
	Transform *NetworkTransform `json:"transform,omitempty"`
}

// NetworkTransform mirrors internal/network's Transform.
type NetworkTransform struct {
	Headers map[string]string `json:"headers,omitempty"`
}

// maxNetworkPolicyBytes bounds an encoded policy (the network package
// bounds the lists at 1024 entries each).
const maxNetworkPolicyBytes = 256 << 10

func encodeNetwork(p *NetworkPolicy, seal NetworkSealer) (string, error) {
	if p == nil {
		return "", nil
	}
	p, err := sealed(p, seal)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("encode network policy: %w", errdefs.ErrInvalid)
	}
	if len(b) > maxNetworkPolicyBytes {
		return "", fmt.Errorf("network policy is %d bytes encoded, more than the %d allowed: %w", len(b), maxNetworkPolicyBytes, errdefs.ErrInvalid)
	}
	return string(b), nil
}

func decodeNetwork(s string, seal NetworkSealer) (*NetworkPolicy, error) {
	if s == "" {
		return nil, nil
	}
	var p NetworkPolicy
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return nil, err
	}
	if ep := p.EgressProxy; ep != nil && ep.SealedPassword != "" {
		pw, err := "", error(errNoSealer)
		if seal != nil {
			pw, err = seal.OpenProxyPassword(ep.SealedPassword)
		}
		if err != nil {
			// The sandbox's record stays readable (listings, destroy); its
			// tunnel fails to authenticate until the proxy is set again.
			slog.Warn("a sandbox's SOCKS5 password does not open; its tunnel will not authenticate", "err", err)
		}
		ep.Password, ep.SealedPassword = pw, ""
	}
	return &p, nil
}

// SetSandboxNetwork replaces a sandbox's stored egress policy (nil: none).
func (s *sandboxTable) SetSandboxNetwork(ctx context.Context, id string, p *NetworkPolicy) error {
	if err := ids.Validate("sandbox id", id); err != nil {
		return err
	}
	enc, err := encodeNetwork(p, s.sealer)
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE sandboxes SET network = ?, updated_at = ? WHERE id = ?`, enc, toNanos(time.Now()), id)
	return oneRow(res, err, "set network policy of sandbox", id)
}

// NetworkEvent is one outbound connection attempt of a sandbox, or one name
// it looked up (Protocol "dns"), with the verdict of its egress policy.
type NetworkEvent struct {
	ID          int64
	SandboxID   string
	At          time.Time
	Verdict     string // allow or deny
	Reason      string // reserved, policy, domain, default, host
	Protocol    string // tcp, udp, icmp, dns, …
	Destination string // an IP address ("" for a denied lookup)
	Port        int
	Domain      string
}

// MaxNetworkEventsPerSandbox is how many audit events a sandbox keeps; older
// ones are dropped as new ones arrive.
const MaxNetworkEventsPerSandbox = 10_000

// AddNetworkEvents appends audit events (of any sandboxes) in one
// transaction, then drops each sandbox's events beyond the newest
// MaxNetworkEventsPerSandbox.
func (s *networkEventTable) AddNetworkEvents(ctx context.Context, evs []NetworkEvent) error {
	if len(evs) == 0 {
		return nil
	}
	return s.writeTx(ctx, func(ctx context.Context, tx *stmtTx) error {
		ins, err := tx.PrepareContext(ctx, `INSERT INTO network_events
			(sandbox_id, at, verdict, reason, protocol, destination, port, domain) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return fmt.Errorf("record network events: %w", dbErr(err))
		}
		defer ins.Close()
		touched := map[string]bool{}
		for _, e := range evs {
			if ids.Validate("sandbox id", e.SandboxID) != nil {
				continue
			}
			if e.At.IsZero() {
				e.At = time.Now()
			}
			if _, err := ins.ExecContext(ctx, e.SandboxID, toNanos(e.At), e.Verdict, e.Reason, e.Protocol,
				e.Destination, e.Port, truncateString(e.Domain, 253)); err != nil {
				return fmt.Errorf("record network event of %s: %w", e.SandboxID, dbErr(err))
			}
			touched[e.SandboxID] = true
		}
		for id := range touched {
			if _, err := tx.ExecContext(ctx, `DELETE FROM network_events WHERE sandbox_id = ? AND id <=
				(SELECT id FROM network_events WHERE sandbox_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`,
				id, id, MaxNetworkEventsPerSandbox); err != nil {
				return fmt.Errorf("prune network events of %s: %w", id, dbErr(err))
			}
		}
		return nil
	})
}

// ListNetworkEvents returns a sandbox's audit events after the one with id
// after (0 = from the oldest kept), oldest first, at most limit (0 = all).
func (s *networkEventTable) ListNetworkEvents(ctx context.Context, sandboxID string, after int64, limit int) ([]NetworkEvent, error) {
	return listHistory(ctx, s.conns, "network_events", "id, sandbox_id, at, verdict, reason, protocol, destination, port, domain", "network events",
		sandboxID, after, limit, func(rows scanner) (NetworkEvent, error) {
			var e NetworkEvent
			var at int64
			err := rows.Scan(&e.ID, &e.SandboxID, &at, &e.Verdict, &e.Reason, &e.Protocol, &e.Destination, &e.Port, &e.Domain)
			e.At = fromNanos(at)
			return e, err
		})
}

// DeleteOrphanNetworkEvents drops the audit events of sandboxes that have no
// record any more (a delete that ran before the events were written).
func (s *networkEventTable) DeleteOrphanNetworkEvents(ctx context.Context) error {
	_, err := s.w.ExecContext(ctx, `DELETE FROM network_events WHERE sandbox_id NOT IN (SELECT id FROM sandboxes)`)
	if err != nil {
		return fmt.Errorf("delete orphan network events: %w", dbErr(err))
	}
	return nil
}

func truncateString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
