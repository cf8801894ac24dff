package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Keyring seals and opens secret values with AES-256-GCM. One master key
// lives in <data>/secrets/key (0600, 32 random bytes, made on first use);
// each team's key is derived from it with HKDF-SHA256, so a sealed value
// copied into another team's row does not open. The secret's id and
// version are the additional data: a value moved to another row or
// version does not open either.
type Keyring struct {
	master []byte
}

const masterKeyLen = 32

// OpenKeyring reads the master key under dir (<data>/secrets), creating it
// when missing. A key file that is readable by others, or of the wrong
// size, is refused rather than used.
func OpenKeyring(dir string) (*Keyring, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("secrets: create %s: %w", dir, err)
	}
	path := filepath.Join(dir, "key")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		b = make([]byte, masterKeyLen)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("secrets: make a master key: %w", err)
		}
		tmp := path + ".new"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return nil, fmt.Errorf("secrets: write the master key: %w", err)
		}
		// A rename never leaves a half-written key for the next start.
		if err := os.Rename(tmp, path); err != nil {
			return nil, fmt.Errorf("secrets: write the master key: %w", err)
		}
		return &Keyring{master: b}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("secrets: read the master key: %w", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("secrets: %s is readable by others (mode %v); chmod 600 it: %w", path, st.Mode().Perm(), errdefs.ErrInvalid)
	}
	if len(b) != masterKeyLen {
		return nil, fmt.Errorf("secrets: %s holds %d bytes, want %d: %w", path, len(b), masterKeyLen, errdefs.ErrInvalid)
	}
	return &Keyring{master: b}, nil
}

func (k *Keyring) aead(team string) (cipher.AEAD, error) {
	key, err := hkdf.Key(sha256.New, k.master, nil, "warren secrets team "+team, 32)
	if err != nil {
		return nil, fmt.Errorf("secrets: derive the key of team %s: %w", team, err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func additional(id string, version int) []byte {
	return []byte(id + "\x00" + strconv.Itoa(version))
}

// Seal encrypts value for version of team's secret id: nonce || ciphertext.
func (k *Keyring) Seal(team, id string, version int, value []byte) ([]byte, error) {
	a, err := k.aead(team)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, a.NonceSize(), a.NonceSize()+len(value)+a.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("secrets: nonce: %w", err)
	}
	return a.Seal(nonce, nonce, value, additional(id, version)), nil
}

// Open decrypts what Seal made. The error never carries any of the value.
func (k *Keyring) Open(team, id string, version int, sealed []byte) ([]byte, error) {
	a, err := k.aead(team)
	if err != nil {
		return nil, err
	}
	if len(sealed) < a.NonceSize() {
		return nil, fmt.Errorf("secrets: sealed value of %s is truncated", id)
	}
	out, err := a.Open(nil, sealed[:a.NonceSize()], sealed[a.NonceSize():], additional(id, version))
	if err != nil {
		return nil, fmt.Errorf("secrets: value of %s version %d does not open with this data directory's key (was <data>/secrets/key replaced?)", id, version)
	}
	return out, nil
}
