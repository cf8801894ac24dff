// Package accesstoken issues and checks the credentials of E2B's sandbox
// plane: each sandbox's envd access token (the X-Access-Token header), its
// traffic token (for ports that are not public) and signed file URLs.
//
// Tokens are derived, not stored: HMAC-SHA256 of the sandbox id under a key
// kept in the data directory. They are stable across daemon restarts, differ
// for every sandbox (a fork gets its own), and die with the key.
package accesstoken

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// keyBytes is the size of the signing key.
const keyBytes = 32

// The errors of a signed URL say what E2B's envd says (a 401 whose message
// its SDK's users see and test for): the signature is checked first, so a
// forger never learns whether the expiration was the problem.
var (
	// ErrBadSignature is returned for a signed URL that does not verify.
	ErrBadSignature = errdefs.Verbatim(errdefs.ErrUnauthenticated, "invalid signature")
	// ErrExpired is returned for a signed URL past its expiration.
	ErrExpired = errdefs.Verbatim(errdefs.ErrUnauthenticated, "signature is already expired")
)

// Issuer derives and checks tokens under one key.
type Issuer struct {
	key []byte
}

// New is an Issuer with the given key (for tests); Load is for daemons.
func New(key []byte) *Issuer { return &Issuer{key: append([]byte(nil), key...)} }

// Load reads the key at path, making a fresh random one (mode 0600) when
// the file does not exist yet.
func Load(path string) (*Issuer, error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		key, derr := hex.DecodeString(strings.TrimSpace(string(b)))
		if derr != nil || len(key) != keyBytes {
			return nil, fmt.Errorf("access token key %s is damaged (want %d hex bytes); remove it to make a new one (every sandbox's token changes)", path, keyBytes)
		}
		return New(key), nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("read access token key: %w", err)
	}
	key := make([]byte, keyBytes)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("make access token key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("make access token key dir: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("write access token key: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("write access token key: %w", err)
	}
	return New(key), nil
}

func (i *Issuer) derive(purpose, sandboxID string) string {
	m := hmac.New(sha256.New, i.key)
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write([]byte(sandboxID))
	return hex.EncodeToString(m.Sum(nil)[:24])
}

// EnvdToken is the sandbox's envd access token (E2B's envdAccessToken).
func (i *Issuer) EnvdToken(sandboxID string) string { return i.derive("envd", sandboxID) }

// TrafficToken is the token that opens a sandbox's non-public ports (E2B's
// trafficAccessToken).
func (i *Issuer) TrafficToken(sandboxID string) string { return i.derive("traffic", sandboxID) }

// Equal compares a presented token with the expected one in constant time.
func Equal(presented, want string) bool {
	return presented != "" && subtle.ConstantTimeCompare([]byte(presented), []byte(want)) == 1
}

// Signed is what a signed file URL carries besides the signature.
type Signed struct {
	Path       string // the `path` query parameter
	Operation  string // "read" (GET /files) or "write" (POST /files)
	User       string // the `username` query parameter, "" when absent
	Signature  string // `signature`: "v1_" + base64(sha256(...)) without padding
	Expiration string // `signature_expiration`: unix seconds, "" for none
}

// Sign computes the signature E2B's SDKs put in file URLs: v1_ then the
// unpadded base64 of sha256("path:operation:user:token[:expiration]").
func Sign(s Signed, token string) string {
	raw := s.Path + ":" + s.Operation + ":" + s.User + ":" + token
	if s.Expiration != "" {
		raw += ":" + s.Expiration
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// Verify checks a signed request against a sandbox's envd token.
func Verify(s Signed, token string, now time.Time) error {
	if !Equal(s.Signature, Sign(s, token)) {
		return ErrBadSignature
	}
	if s.Expiration != "" {
		exp, err := strconv.ParseInt(s.Expiration, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: signature_expiration %q is not unix seconds", ErrBadSignature, s.Expiration)
		}
		if now.Unix() > exp {
			return ErrExpired
		}
	}
	return nil
}
