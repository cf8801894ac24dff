package accesstoken

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

func TestLoadMakesAndKeepsKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secrets", "access.key")
	a, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v, want 0600", fi.Mode().Perm())
	}
	b, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if a.EnvdToken("sb1") != b.EnvdToken("sb1") {
		t.Error("token changed across loads of the same key")
	}
	if a.EnvdToken("sb1") == a.EnvdToken("sb2") {
		t.Error("two sandboxes share a token")
	}
	if a.EnvdToken("sb1") == a.TrafficToken("sb1") {
		t.Error("envd and traffic tokens are the same")
	}
	if err := os.WriteFile(path, []byte("nothex"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil {
		t.Error("a damaged key loaded")
	}
}

func TestEqual(t *testing.T) {
	if Equal("", "") {
		t.Error("empty token accepted")
	}
	if !Equal("abc", "abc") || Equal("abc", "abd") || Equal("ab", "abc") {
		t.Error("Equal is wrong")
	}
}

func TestSignVerify(t *testing.T) {
	// The SDK signs "path:operation:user:token" and sends v1_ + unpadded
	// base64 of its sha256; this is the value for these inputs.
	s := Signed{Path: "/home/user/a.txt", Operation: "read", User: "user"}
	s.Signature = Sign(s, "tok")
	// (computed with node's crypto, as the SDK does)
	if want := "v1_p0WqJQYCLtO6YX+e4h7VbpybRsdJbMbIw7clYpulIJk"; s.Signature != want {
		t.Fatalf("signature %q, want %q", s.Signature, want)
	}
	now := time.Unix(1_000_000, 0)
	if err := Verify(s, "tok", now); err != nil {
		t.Fatalf("good signature refused: %v", err)
	}
	if err := Verify(s, "other", now); !errors.Is(err, ErrBadSignature) {
		t.Errorf("other token: %v", err)
	}
	w := s
	w.Operation = "write"
	if err := Verify(w, "tok", now); !errors.Is(err, ErrBadSignature) {
		t.Errorf("read signature used to write: %v", err)
	}
	e := Signed{Path: "a", Operation: "write", Expiration: strconv.FormatInt(now.Unix()+10, 10)}
	e.Signature = Sign(e, "tok")
	if err := Verify(e, "tok", now); err != nil {
		t.Errorf("unexpired: %v", err)
	}
	if err := Verify(e, "tok", now.Add(11*time.Second)); !errors.Is(err, ErrExpired) {
		t.Errorf("expired: %v", err)
	}
	e.Expiration = strconv.FormatInt(now.Unix()+3600, 10) // extended without re-signing
	if err := Verify(e, "tok", now); !errors.Is(err, ErrBadSignature) {
		t.Errorf("tampered expiration: %v", err)
	}
}

// A signed URL's errors are E2B's envd's, word for word (its SDK's users
// and tests compare them), and 401s.
func TestSignedErrorsAreE2Bs(t *testing.T) {
	for err, want := range map[error]string{ErrExpired: "signature is already expired", ErrBadSignature: "invalid signature"} {
		if err.Error() != want || !errors.Is(err, errdefs.ErrUnauthenticated) {
			t.Errorf("%q: want %q, unauthenticated", err, want)
		}
	}
	// The signature is checked first: a forged one with a past expiration
	// is invalid, not expired.
	past := strconv.FormatInt(time.Now().Unix()-10, 10)
	s := Signed{Path: "a", Operation: "read", Expiration: past, Signature: "v1_forged"}
	if err := Verify(s, "tok", time.Now()); !errors.Is(err, ErrBadSignature) {
		t.Errorf("forged and past: %v", err)
	}
	s.Signature = Sign(s, "tok")
	if err := Verify(s, "tok", time.Now()); !errors.Is(err, ErrExpired) {
		t.Errorf("signed and past: %v", err)
	}
}
