package server

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/store"
)

// authCacheTTL bounds how long a key's validity is remembered without
// asking the database. Revocations through this server take effect at
// once; one made by another process within this long.
const authCacheTTL = 2 * time.Second

// authCacheMax bounds the cache so that a flood of distinct keys cannot
// grow it without limit (only valid keys are cached, but be safe).
const authCacheMax = 4096

// authCache remembers recently authenticated keys: every API call is
// authenticated, and a database read per call would dominate a fast exec.
type authCache struct {
	keys Keys
	now  func() time.Time

	mu      sync.Mutex
	entries map[[32]byte]authEntry
}

type authEntry struct {
	key   store.APIKey
	until time.Time
}

func newAuthCache(keys Keys) *authCache {
	return &authCache{keys: keys, now: time.Now, entries: map[[32]byte]authEntry{}}
}

func (c *authCache) authenticate(ctx context.Context, plaintext string) (store.APIKey, error) {
	// Keyed by a hash so that the map holds no secrets.
	h := sha256.Sum256([]byte(plaintext))
	now := c.now()
	c.mu.Lock()
	if e, ok := c.entries[h]; ok && now.Before(e.until) {
		c.mu.Unlock()
		return e.key, nil
	}
	c.mu.Unlock()
	k, err := c.keys.AuthenticateKey(ctx, plaintext)
	if err != nil {
		return store.APIKey{}, err
	}
	c.mu.Lock()
	if len(c.entries) >= authCacheMax {
		clear(c.entries)
	}
	c.entries[h] = authEntry{key: k, until: now.Add(authCacheTTL)}
	c.mu.Unlock()
	return k, nil
}

// forget drops every cached key (after a revocation).
func (c *authCache) forget() {
	c.mu.Lock()
	clear(c.entries)
	c.mu.Unlock()
}
