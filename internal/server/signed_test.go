package server

import (
	"fmt"
	"testing"

	"github.com/warrenhq/warren/internal/accesstoken"
)

// A signed URL that fails answers E2B's envd's 401s, whatever the detail.
func TestSignedErr(t *testing.T) {
	for in, want := range map[error]error{
		nil:                         nil,
		accesstoken.ErrExpired:      accesstoken.ErrExpired,
		accesstoken.ErrBadSignature: accesstoken.ErrBadSignature,
		fmt.Errorf("%w: signature_expiration %q is not unix seconds", accesstoken.ErrBadSignature, "x"): accesstoken.ErrBadSignature,
	} {
		got := signedErr(in)
		if got != want {
			t.Errorf("signedErr(%v) = %v, want %v", in, got, want)
		}
		if got != nil && statusOf(got) != 401 {
			t.Errorf("%v: status %d, want 401", got, statusOf(got))
		}
	}
}
