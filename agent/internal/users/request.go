package users

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// ErrBadAuthorization is returned for an Authorization header that is not
// E2B's "Basic base64(<user>:)".
var ErrBadAuthorization = errors.New("malformed Authorization header")

// NameFromRequest is the user an envd request asks to act as: the `username`
// query parameter when set, else the user of a Basic Authorization header
// (E2B's SDKs send "Basic base64(<user>:)" with an empty password), else ""
// (the caller's default: DB.DefaultUser). The daemon has already checked the
// caller's right to use the sandbox; inside it, any account may be chosen.
func NameFromRequest(r *http.Request) (string, error) {
	if q := r.URL.Query().Get("username"); q != "" {
		return q, nil
	}
	return NameFromHeader(r.Header)
}

// NameFromHeader is NameFromRequest for a Connect call, which has only headers.
func NameFromHeader(h http.Header) (string, error) {
	auth := h.Get("Authorization")
	if auth == "" {
		return "", nil
	}
	scheme, rest, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", fmt.Errorf("%w: want Basic credentials", ErrBadAuthorization)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadAuthorization, err)
	}
	name, _, _ := strings.Cut(string(raw), ":")
	if len(name) > 256 || strings.ContainsAny(name, "\x00\n/") {
		return "", fmt.Errorf("%w: user name is not valid", ErrBadAuthorization)
	}
	return name, nil
}
