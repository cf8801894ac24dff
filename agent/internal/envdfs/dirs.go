package envdfs

import (
	"os"
	"path/filepath"
)

const (
	newDirMode  = 0o755
	newFileMode = 0o644
)

// mkdirAll creates dir and its missing parents, mode 0755 and owned by
// uid:gid (as envd does, whoever owns the parent), and returns the
// directories it created, outermost first. On failure it removes them again.
func mkdirAll(dir string, uid, gid int) (created []string, err error) {
	var missing []string
	for p := dir; ; {
		fi, err := os.Stat(p)
		if err == nil {
			if !fi.IsDir() {
				return nil, failedPrecondition("make directory %s: %s exists and is not a directory", dir, p)
			}
			break
		}
		if !os.IsNotExist(err) {
			return nil, fsError("make directory", p, err)
		}
		missing = append(missing, p)
		parent := filepath.Dir(p)
		if parent == p {
			break
		}
		p = parent
	}
	defer func() {
		if err != nil {
			removeDirs(created)
			created = nil
		}
	}()
	for i := len(missing) - 1; i >= 0; i-- {
		p := missing[i]
		if err := os.Mkdir(p, newDirMode); err != nil {
			if fi, serr := os.Stat(p); os.IsExist(err) && serr == nil && fi.IsDir() {
				continue // made concurrently
			}
			return created, fsError("make directory", p, err)
		}
		created = append(created, p)
		// Mkdir applied the agent's umask; the mode must not depend on it.
		if err := os.Chmod(p, newDirMode); err != nil {
			return created, fsError("chmod", p, err)
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return created, fsError("chown", p, err)
		}
	}
	return created, nil
}

// removeDirs undoes mkdirAll, innermost first; a directory someone filled
// meanwhile stays.
func removeDirs(created []string) {
	for i := len(created) - 1; i >= 0; i-- {
		_ = os.Remove(created[i])
	}
}
