package files

import (
	"fmt"
	"os"

	"connectrpc.com/connect"
)

// owner resolves the user that created files and directories belong to.
func (s *Service) owner(name string) (uid, gid int, err error) {
	u, err := s.cfg.Users.Lookup(name)
	if err != nil {
		return 0, 0, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("owner: %w", err))
	}
	return int(u.UID), int(u.GID), nil
}

// mkdirAll creates dir and its missing parents with mode, owned by uid:gid,
// and returns the directories it created (outermost first). On failure it
// removes what it created.
func mkdirAll(dir string, mode os.FileMode, uid, gid int) (created []string, err error) {
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
			return nil, toConnect("make directory", p, err)
		}
		missing = append(missing, p)
		parent := parentDir(p)
		if parent == p {
			break
		}
		p = parent
	}
	defer func() {
		if err != nil {
			for i := len(created) - 1; i >= 0; i-- {
				_ = os.Remove(created[i])
			}
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
			return created, toConnect("make directory", p, err)
		}
		created = append(created, p)
		// Mkdir applied the umask; the caller asked for mode exactly.
		if err := os.Chmod(p, mode); err != nil {
			return created, toConnect("chmod", p, err)
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return created, toConnect("chown", p, err)
		}
	}
	return created, nil
}
