package session

import (
	"context"
	"fmt"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
)

// The fake host's archive: a stream is a path that names its parent.

func (h *fakeHost) CanArchive() bool { return true }

func (h *fakeHost) ArchiveSnapshot(ctx context.Context, snapID, parentID string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.snaps[snapID] || !h.snaps[parentID] {
		return "", fmt.Errorf("archive %s against %s: %w", snapID, parentID, errdefs.ErrNotFound)
	}
	if h.streams == nil {
		h.streams = map[string]string{}
	}
	p := "/archive/" + snapID + ".stream"
	h.streams[p] = parentID
	h.archived = append(h.archived, snapID)
	return p, nil
}

func (h *fakeHost) RestoreSnapshot(ctx context.Context, snapID, baseID string, paths []string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(paths) == 0 || !h.snaps[baseID] {
		return fmt.Errorf("restore %s: base %s gone: %w", snapID, baseID, errdefs.ErrNotFound)
	}
	// Each stream is a delta against what the one before rebuilds.
	parent := baseID
	for _, p := range paths {
		if got, ok := h.streams[p]; !ok || got != parent {
			return fmt.Errorf("restore %s: stream %s is not a delta against %s: %w", snapID, p, parent, errdefs.ErrNotFound)
		}
		parent = strings.TrimSuffix(strings.TrimPrefix(p, "/archive/"), ".stream")
	}
	if parent != snapID {
		return fmt.Errorf("restore %s: the chain rebuilds %s: %w", snapID, parent, errdefs.ErrInvalid)
	}
	if h.snaps[snapID] {
		return fmt.Errorf("restore %s: %w", snapID, errdefs.ErrAlreadyExists)
	}
	h.snaps[snapID] = true
	h.restored = append(h.restored, snapID)
	h.chains = append(h.chains, len(paths))
	return nil
}

func (h *fakeHost) HasArchive(path string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.streams[path]
	return ok
}

func (h *fakeHost) RemoveArchive(path string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !strings.HasPrefix(path, "/archive/") {
		return errdefs.ErrInvalid
	}
	delete(h.streams, path)
	return nil
}

func (h *fakeHost) ReconcileArchives(keep map[string]bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for p := range h.streams {
		if !keep[p] {
			delete(h.streams, p)
		}
	}
	return nil
}
