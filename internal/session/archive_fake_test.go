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

func (h *fakeHost) RestoreSnapshot(ctx context.Context, snapID, parentID, path string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.streams[path] != parentID || !h.snaps[parentID] {
		return fmt.Errorf("restore %s: parent %s gone: %w", snapID, parentID, errdefs.ErrNotFound)
	}
	if h.snaps[snapID] {
		return fmt.Errorf("restore %s: %w", snapID, errdefs.ErrAlreadyExists)
	}
	h.snaps[snapID] = true
	h.restored = append(h.restored, snapID)
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
