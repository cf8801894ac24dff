package envdfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/warrenhq/warren/agent/internal/fsops"
)

// Uploads go to a temporary file beside the target that is renamed over it
// only once complete, so a cut or failed upload never leaves a half file.
// The temporary name tells the watcher (watcher.go) what the rename means, so
// watchers see the CREATE/WRITE events envd's in-place write produces rather
// than the temporary file: uploadNewPrefix for a file that did not exist,
// uploadReplacePrefix for one that did.
const (
	uploadTempPrefix    = ".warren-upload-"
	uploadNewPrefix     = uploadTempPrefix + "n-"
	uploadReplacePrefix = uploadTempPrefix + "r-"
)

func isUploadTemp(name string) bool { return strings.HasPrefix(name, uploadTempPrefix) }

// writtenFile is what an upload produced.
type writtenFile struct {
	metadata map[string]string // as stored; nil when none
}

// writeFile replaces path's content with r, as the caller: a new file gets
// mode 0644, an existing one keeps its mode; either way it then belongs to
// the caller, as envd does. Missing parents are created for the caller. A
// symlink at path is written through, like open(2) would.
func writeFile(path string, r io.Reader, c caller, md map[string]string) (writtenFile, error) {
	target := path
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if resolved, err := filepath.EvalSymlinks(path); err == nil {
			target = resolved
		}
	}
	mode, prefix := os.FileMode(newFileMode), uploadNewPrefix
	switch fi, err := os.Stat(target); {
	case err == nil && fi.IsDir():
		return writtenFile{}, invalidArg("write %s: path is a directory", path)
	case err == nil && !fi.Mode().IsRegular():
		return writtenFile{}, invalidArg("write %s: path exists and is not a regular file", path)
	case err == nil:
		mode, prefix = fi.Mode().Perm(), uploadReplacePrefix
	case errors.Is(err, fs.ErrNotExist):
	default:
		return writtenFile{}, fsError("write", path, err)
	}
	uid, gid := int(c.UID), int(c.GID)
	created, err := mkdirAll(filepath.Dir(target), uid, gid)
	if err != nil {
		return writtenFile{}, err
	}
	ok := false
	defer func() {
		if !ok {
			fsops.RemoveDirs(created)
		}
	}()
	tmp, err := os.CreateTemp(filepath.Dir(target), prefix+"*")
	if err != nil {
		return writtenFile{}, fsError("write", path, err)
	}
	defer func() {
		if !ok {
			tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, r); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return writtenFile{}, fsError("write", path, err)
		}
		return writtenFile{}, invalidArg("write %s: reading the upload failed: %v", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		return writtenFile{}, fsError("chmod", path, err)
	}
	if err := tmp.Chown(uid, gid); err != nil {
		return writtenFile{}, fsError("chown", path, err)
	}
	stored, err := writeMetadata(tmp, md)
	if err != nil {
		return writtenFile{}, fsError("write metadata of", path, err)
	}
	if err := tmp.Close(); err != nil {
		return writtenFile{}, fsError("write", path, err)
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return writtenFile{}, fsError("write", path, err)
	}
	ok = true
	return writtenFile{metadata: stored}, nil
}
