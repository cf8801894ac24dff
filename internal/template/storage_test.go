package template

import (
	"context"
	"fmt"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/storage/dir"
)

// testStorage is the dir backend with a switch to make Snapshot fail, to
// test that a build cleans up after itself.
type testStorage struct {
	*dir.Storage
	failSnapshot bool
}

func newTestStorage(t *testing.T) *testStorage {
	t.Helper()
	s, err := dir.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &testStorage{Storage: s}
}

func (s *testStorage) Snapshot(ctx context.Context, parent, key storage.Key, opts storage.SnapshotOptions) (string, error) {
	if s.failSnapshot {
		return "", fmt.Errorf("snapshot %s: injected failure: %w", key, errdefs.ErrUnavailable)
	}
	return s.Storage.Snapshot(ctx, parent, key, opts)
}
