package errdefs

import (
	"errors"
	"net/http"
)

// HTTPStatus is the HTTP status of err's kind, or 0 when err has none of
// these kinds. The node's API and the fleet's gateway answer with it, each
// after the errors of its own it maps first, so a kind reads the same
// through either.
func HTTPStatus(err error) int {
	switch {
	case IsNotFound(err):
		return http.StatusNotFound
	case IsAlreadyExists(err), IsConflict(err):
		return http.StatusConflict
	case IsInvalid(err):
		return http.StatusBadRequest
	case errors.Is(err, ErrUnauthenticated):
		return http.StatusUnauthorized
	case errors.Is(err, ErrPermissionDenied):
		return http.StatusForbidden
	case errors.Is(err, ErrNoSpace):
		return http.StatusInsufficientStorage
	case IsResourceExhausted(err):
		return http.StatusTooManyRequests
	case IsUnsupported(err):
		return http.StatusNotImplemented
	case IsUnavailable(err):
		return http.StatusBadGateway
	}
	return 0
}
