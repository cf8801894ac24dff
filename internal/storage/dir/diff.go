package dir

import (
	"context"
	"fmt"

	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/storage/treediff"
)

var _ storage.Differ = (*Storage)(nil)

// Diff implements storage.Differ by walking both trees. Volumes here are
// copies, so inode numbers and ctimes differ for every file: a path is
// modified when its type, size, mtime, mode, owner or symlink target
// differs (treediff without SameInodes).
func (s *Storage) Diff(ctx context.Context, from, to storage.Key) ([]storage.Change, error) {
	for _, k := range []storage.Key{from, to} {
		if err := k.Validate(); err != nil {
			return nil, err
		}
		if err := s.checkVolume(k); err != nil {
			return nil, fmt.Errorf("diff %s: %w", k, err)
		}
	}
	if from == to {
		return []storage.Change{}, nil
	}
	return treediff.Walk(ctx, s.Path(from), s.Path(to), treediff.Options{})
}
