package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
)

// A SOCKS5 upstream's password (a sandbox's network.egressProxy) is kept
// sealed in the sandbox's record, under a key derived from the same master
// key as the secrets' but with a purpose of its own, so that a sealed
// password never opens as a secret's value nor the other way round. It is
// not bound to a team or a sandbox: forks and moves copy the sealed text
// as it is.

// proxyPassPrefix is the version of the sealed form: "v1:" then base64 of
// nonce || ciphertext. A later key or cipher takes the next number.
const proxyPassPrefix = "v1:"

// proxyPassAD is the additional data of every sealed proxy password.
var proxyPassAD = []byte("warren egress socks5 password")

func (k *Keyring) proxyAEAD() (cipher.AEAD, error) {
	key, err := hkdf.Key(sha256.New, k.master, nil, "warren egress socks5 password", 32)
	if err != nil {
		return nil, fmt.Errorf("secrets: derive the proxy password key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// SealProxyPassword seals a SOCKS5 password for the metadata store.
func (k *Keyring) SealProxyPassword(password string) (string, error) {
	a, err := k.proxyAEAD()
	if err != nil {
		return "", err
	}
	nonce := make([]byte, a.NonceSize(), a.NonceSize()+len(password)+a.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("secrets: nonce: %w", err)
	}
	return proxyPassPrefix + base64.RawStdEncoding.EncodeToString(a.Seal(nonce, nonce, []byte(password), proxyPassAD)), nil
}

// OpenProxyPassword opens what SealProxyPassword made. The error never
// carries any of the password.
func (k *Keyring) OpenProxyPassword(sealed string) (string, error) {
	rest, ok := strings.CutPrefix(sealed, proxyPassPrefix)
	if !ok {
		return "", fmt.Errorf("secrets: sealed proxy password of an unknown version: %w", errdefs.ErrInvalid)
	}
	b, err := base64.RawStdEncoding.DecodeString(rest)
	if err != nil {
		return "", fmt.Errorf("secrets: sealed proxy password is not base64: %w", errdefs.ErrInvalid)
	}
	a, err := k.proxyAEAD()
	if err != nil {
		return "", err
	}
	if len(b) < a.NonceSize() {
		return "", fmt.Errorf("secrets: sealed proxy password is truncated: %w", errdefs.ErrInvalid)
	}
	out, err := a.Open(nil, b[:a.NonceSize()], b[a.NonceSize():], proxyPassAD)
	if err != nil {
		return "", fmt.Errorf("secrets: a SOCKS5 password does not open with this data directory's key (was <data>/secrets/key replaced?): %w", errdefs.ErrInvalid)
	}
	return string(out), nil
}
