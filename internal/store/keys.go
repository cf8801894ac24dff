package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
)

// API keys look like E2B's: "e2b_" then 32 lowercase hex digits (16 random
// bytes). Only their SHA-256 is stored.
const (
	keyPrefix   = "e2b_"
	keyHexLen   = 32
	keyLen      = len(keyPrefix) + keyHexLen
	displayLen  = len(keyPrefix) + 8 // "e2b_1a2b3c4d": enough to tell keys apart, 96 random bits stay secret
	keyIDLen    = 16
	maxNameLen  = 200
	lastUsedGap = time.Minute // LastUsedAt is refreshed at most this often, so auth does not write on every request
)

// APIKey is the stored record of an API key; the key itself is never stored.
type APIKey struct {
	ID         string // public, random, unrelated to the key's secret part
	Team, Name string
	Prefix     string // the key's first characters, "e2b_1a2b3c4d", to recognise it in a list
	CreatedAt  time.Time
	LastUsedAt time.Time // zero = never used
	Revoked    bool
}

// NewKey returns a fresh random API key.
func NewKey() (string, error) {
	b := make([]byte, keyHexLen/2)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("read random bytes for an API key: %w", err)
	}
	return keyPrefix + hex.EncodeToString(b), nil
}

// HashKey returns the SHA-256 of a key, hex-encoded.
//
// A fast unsalted hash is right here, unlike for passwords: a key carries 128
// bits from crypto/rand, so guessing it is out of reach however cheap each
// guess is, and salts or slow KDFs only defend low-entropy secrets. A
// deterministic hash also lets AuthenticateKey find the key with an indexed
// lookup instead of trying every stored hash.
func HashKey(plaintext string) string {
	sum := sha256.Sum256([]byte(plaintext))
	return hex.EncodeToString(sum[:])
}

// wellFormedKey reports whether k has the shape NewKey produces.
func wellFormedKey(k string) bool {
	if len(k) != keyLen || !strings.HasPrefix(k, keyPrefix) {
		return false
	}
	for _, c := range k[len(keyPrefix):] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// CreateAPIKey makes a new key for team and stores its hash. The plaintext is
// returned once and cannot be recovered later.
func (s *keyTable) CreateAPIKey(ctx context.Context, team, name string) (string, APIKey, error) {
	if err := ids.ValidateName("team", team); err != nil {
		return "", APIKey{}, err
	}
	if len(name) > maxNameLen || !utf8.ValidString(name) {
		return "", APIKey{}, fmt.Errorf("API key name must be valid UTF-8 of at most %d bytes: %w", maxNameLen, errdefs.ErrInvalid)
	}
	plain, err := NewKey()
	if err != nil {
		return "", APIKey{}, err
	}
	k := APIKey{
		ID:        ids.New(keyIDLen),
		Team:      team,
		Name:      name,
		Prefix:    plain[:displayLen],
		CreatedAt: time.Now().UTC(),
	}
	_, err = s.w.ExecContext(ctx, `INSERT INTO api_keys (id, team, name, prefix, hash, created_at)
		VALUES (?, ?, ?, ?, ?, ?)`, k.ID, k.Team, k.Name, k.Prefix, HashKey(plain), toNanos(k.CreatedAt))
	if err != nil {
		return "", APIKey{}, fmt.Errorf("create API key for team %s: %w", team, dbErr(err))
	}
	return plain, k, nil
}

// AuthenticateKey returns the key record for plaintext. A malformed, unknown
// or revoked key is ErrUnauthenticated (the message never repeats the key).
//
// No constant-time comparison is needed: the key is never compared with a
// secret byte by byte; its SHA-256 is looked up in an index. Lookup timing
// could reveal only how the hash of a guess relates to stored hashes, and
// SHA-256 being preimage-resistant, an attacker cannot steer a guess's hash
// toward a stored one, so that says nothing about any key.
func (s *keyTable) AuthenticateKey(ctx context.Context, plaintext string) (APIKey, error) {
	if !wellFormedKey(plaintext) {
		return APIKey{}, fmt.Errorf("API key is malformed: it must be %q followed by %d lowercase hex digits: %w",
			keyPrefix, keyHexLen, errdefs.ErrUnauthenticated)
	}
	row := s.r.QueryRowContext(ctx, `SELECT `+keyCols+` FROM api_keys WHERE hash = ?`, HashKey(plaintext))
	k, err := scanKey(row)
	if errors.Is(err, sql.ErrNoRows) {
		return APIKey{}, fmt.Errorf("API key %s… is not known: %w", plaintext[:displayLen], errdefs.ErrUnauthenticated)
	}
	if err != nil {
		return APIKey{}, fmt.Errorf("authenticate API key: %w", dbErr(err))
	}
	if k.Revoked {
		return APIKey{}, fmt.Errorf("API key %s… was revoked; create a new one: %w", k.Prefix, errdefs.ErrUnauthenticated)
	}
	now := time.Now().UTC()
	if now.Sub(k.LastUsedAt) >= lastUsedGap {
		// Best effort: a failure to record the use must not turn a valid key
		// away. The WHERE keeps concurrent requests from writing it twice.
		_, err := s.w.ExecContext(ctx, `UPDATE api_keys SET last_used_at = ? WHERE id = ? AND last_used_at <= ?`,
			toNanos(now), k.ID, toNanos(now.Add(-lastUsedGap)))
		if err != nil {
			slog.WarnContext(ctx, "record API key use", "key", k.ID, "err", err)
		} else {
			k.LastUsedAt = now
		}
	}
	return k, nil
}

// ListAPIKeys returns the keys of team ("" = every team), revoked ones
// included, oldest first.
func (s *keyTable) ListAPIKeys(ctx context.Context, team string) ([]APIKey, error) {
	q := `SELECT ` + keyCols + ` FROM api_keys`
	var args []any
	if team != "" {
		if err := ids.ValidateName("team", team); err != nil {
			return nil, err
		}
		q += ` WHERE team = ?`
		args = append(args, team)
	}
	q += ` ORDER BY created_at, id`
	return queryAll(ctx, s.r, "list API keys", scanKey, q, args...)
}

// RevokeAPIKey revokes the key with this id (its record is kept). Revoking a
// revoked key is not an error; an unknown id is ErrNotFound.
func (s *keyTable) RevokeAPIKey(ctx context.Context, id string) error {
	res, err := s.w.ExecContext(ctx, `UPDATE api_keys SET revoked = 1 WHERE id = ?`, id)
	return oneRow(res, err, "revoke API key", id)
}

// CountAPIKeys counts the keys that are not revoked (the daemon makes a first
// key when there is none).
func (s *keyTable) CountAPIKeys(ctx context.Context) (int, error) {
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM api_keys WHERE revoked = 0`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count API keys: %w", dbErr(err))
	}
	return n, nil
}

const keyCols = `id, team, name, prefix, created_at, last_used_at, revoked`

func scanKey(sc scanner) (APIKey, error) {
	var k APIKey
	var created, used int64
	if err := sc.Scan(&k.ID, &k.Team, &k.Name, &k.Prefix, &created, &used, &k.Revoked); err != nil {
		return APIKey{}, err
	}
	k.CreatedAt, k.LastUsedAt = fromNanos(created), fromNanos(used)
	return k, nil
}
