package tplbuild

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/warrenhq/warren/internal/errdefs"
)

// fileStore keeps the archives copy steps upload, one per team and
// content hash, so that unchanged files are sent once.
type fileStore struct{ dir string }

func (f fileStore) path(team, hash string) string {
	return filepath.Join(f.dir, team, hash+".tar")
}

// Present tells whether a team's archive of that hash is stored.
func (f fileStore) Present(team, hash string) bool {
	_, err := os.Stat(f.path(team, hash))
	return err == nil
}

// Put stores an upload after checking it (checkTar): a bad archive is
// refused and nothing is kept. At most limit bytes are read.
func (f fileStore) Put(team, hash string, body io.Reader, limit int64) (int64, error) {
	if err := CheckFilesHash(hash); err != nil {
		return 0, err
	}
	dir := filepath.Join(f.dir, team)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	tmp, err := os.CreateTemp(dir, ".upload-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	n, err := io.Copy(tmp, io.LimitReader(body, limit+1))
	if err != nil {
		return n, fmt.Errorf("read upload: %w", err)
	}
	if n > limit {
		return n, fmt.Errorf("upload is over %d bytes: %w", limit, errdefs.ErrResourceExhausted)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return n, err
	}
	if _, err := checkTar(tmp); err != nil {
		return n, err
	}
	if err := tmp.Close(); err != nil {
		return n, err
	}
	return n, os.Rename(tmp.Name(), f.path(team, hash))
}

// Open opens a stored archive and tells whether it is gzipped.
func (f fileStore) Open(team, hash string) (*os.File, bool, error) {
	file, err := os.Open(f.path(team, hash))
	if os.IsNotExist(err) {
		return nil, false, fmt.Errorf("files %s were never uploaded (GET /templates/{id}/files/%s gives the upload link): %w", hash, hash, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, false, err
	}
	var magic [2]byte
	_, _ = io.ReadFull(file, magic[:])
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		file.Close()
		return nil, false, err
	}
	return file, magic[0] == 0x1f && magic[1] == 0x8b, nil
}
