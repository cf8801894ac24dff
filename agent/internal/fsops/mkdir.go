package fsops

import (
	"fmt"
	"os"
	"path/filepath"

	"connectrpc.com/connect"
)

// MkdirAll creates dir and its missing parents with exactly mode (whatever
// the agent's umask), owned by uid:gid, and returns the directories it
// created, outermost first. On failure it removes them again.
func (rules Errors) MkdirAll(dir string, mode os.FileMode, uid, gid int) (created []string, err error) {
	var missing []string
	for p := dir; ; {
		fi, err := os.Stat(p)
		if err == nil {
			if !fi.IsDir() {
				return nil, connect.NewError(connect.CodeFailedPrecondition,
					fmt.Errorf("make directory %s: %s exists and is not a directory", dir, p))
			}
			break
		}
		if !os.IsNotExist(err) {
			return nil, rules.Connect("make directory", p, err)
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
			RemoveDirs(created)
			created = nil
		}
	}()
	for i := len(missing) - 1; i >= 0; i-- {
		p := missing[i]
		if err := os.Mkdir(p, mode); err != nil {
			if os.IsExist(err) {
				if fi, serr := os.Stat(p); serr == nil && fi.IsDir() {
					continue // made concurrently by someone else
				}
			}
			return created, rules.Connect("make directory", p, err)
		}
		created = append(created, p)
		if err := os.Chmod(p, mode); err != nil {
			return created, rules.Connect("chmod", p, err)
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return created, rules.Connect("chown", p, err)
		}
	}
	return created, nil
}

// RemoveDirs undoes MkdirAll, innermost first; a directory someone filled
// meanwhile stays.
func RemoveDirs(created []string) {
	for i := len(created) - 1; i >= 0; i-- {
		_ = os.Remove(created[i])
	}
}
