package native

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A freeze that fails now and then is retried; one that keeps failing
// reports how often it was tried.
func TestFreezeRetries(t *testing.T) {
	n := 0
	flaky := func() error {
		n++
		if n < 3 {
			return errors.New("unable to freeze")
		}
		return nil
	}
	if err := freeze(context.Background(), "x", flaky); err != nil || n != 3 {
		t.Fatalf("flaky freeze: %v after %d tries", err, n)
	}
	n = 0
	if err := freeze(context.Background(), "x", func() error { n++; return errors.New("unable to freeze") }); err == nil || n != freezeAttempts || !strings.Contains(err.Error(), "attempts") {
		t.Fatalf("stuck freeze: %v after %d tries", err, n)
	}
}
