package files

import (
	"fmt"

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
