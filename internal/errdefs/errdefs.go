// Package errdefs defines the kinds of error warren's packages return.
//
// Packages wrap one of these with context (fmt.Errorf("sandbox %s: %w", id,
// errdefs.ErrNotFound)); only the API layer maps a kind to a status code.
package errdefs

import "errors"

var (
	ErrNotFound          = errors.New("not found")
	ErrAlreadyExists     = errors.New("already exists")
	ErrConflict          = errors.New("conflict")
	ErrInvalid           = errors.New("invalid argument")
	ErrUnavailable       = errors.New("unavailable")
	ErrUnsupported       = errors.New("unsupported")
	ErrResourceExhausted = errors.New("resource exhausted")
	ErrUnauthenticated   = errors.New("unauthenticated")
	ErrPermissionDenied  = errors.New("permission denied")
	// ErrNoSpace: a write found its volume's quota (or the disk) full;
	// E2B answers 507, which its SDK shows as NotEnoughSpaceError.
	ErrNoSpace = errors.New("not enough space")
)

func IsNotFound(err error) bool          { return errors.Is(err, ErrNotFound) }
func IsAlreadyExists(err error) bool     { return errors.Is(err, ErrAlreadyExists) }
func IsConflict(err error) bool          { return errors.Is(err, ErrConflict) }
func IsInvalid(err error) bool           { return errors.Is(err, ErrInvalid) }
func IsUnavailable(err error) bool       { return errors.Is(err, ErrUnavailable) }
func IsUnsupported(err error) bool       { return errors.Is(err, ErrUnsupported) }
func IsResourceExhausted(err error) bool { return errors.Is(err, ErrResourceExhausted) }

// Verbatim returns an error of kind whose text is exactly msg: for messages
// a wire protocol fixes (E2B's SDK shows some to users as they come), which
// wrapping with %w would change.
func Verbatim(kind error, msg string) error { return &verbatim{kind: kind, msg: msg} }

type verbatim struct {
	kind error
	msg  string
}

func (v *verbatim) Error() string { return v.msg }
func (v *verbatim) Unwrap() error { return v.kind }
