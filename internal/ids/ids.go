// Package ids makes and validates the identifiers warren hands out.
//
// Every id is lowercase letters and digits (safe in a host name, a path
// component and a cgroup name), bounded in length, and validated once at the
// edge of the system.
package ids

import (
	"crypto/rand"
	"fmt"

	"github.com/warrenhq/warren/internal/errdefs"
)

// MaxLen bounds every id so that paths, cgroup names and host names built
// from it stay well inside kernel limits.
const MaxLen = 63

const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// New returns a random id of n characters (n ≤ MaxLen) starting with a letter.
func New(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	for i := range b {
		if i == 0 {
			b[i] = alphabet[int(b[i])%26]
			continue
		}
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// Validate checks that s is a well-formed id: 1..MaxLen lowercase letters
// and digits. what names the id in the error ("sandbox id").
func Validate(what, s string) error {
	if s == "" {
		return fmt.Errorf("%s is empty: %w", what, errdefs.ErrInvalid)
	}
	if len(s) > MaxLen {
		return fmt.Errorf("%s %.16q... is longer than %d characters: %w", what, s, MaxLen, errdefs.ErrInvalid)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return fmt.Errorf("%s %q may hold only lowercase letters and digits: %w", what, s, errdefs.ErrInvalid)
		}
	}
	return nil
}

// ValidateName checks a user-chosen name (templates, snapshots): like an id
// but '-', '_' and '.' are also allowed after the first character, and it may
// not be "." or "..".
func ValidateName(what, s string) error {
	if s == "" {
		return fmt.Errorf("%s is empty: %w", what, errdefs.ErrInvalid)
	}
	if len(s) > MaxLen {
		return fmt.Errorf("%s is longer than %d characters: %w", what, MaxLen, errdefs.ErrInvalid)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
		if i > 0 && (c == '-' || c == '_' || c == '.') {
			ok = true
		}
		if !ok {
			return fmt.Errorf("%s %q must start with a lowercase letter or digit and hold only [a-z0-9._-]: %w", what, s, errdefs.ErrInvalid)
		}
	}
	return nil
}
