package files

import (
	"context"
	"fmt"
	"os"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
)

// MakeDir creates a directory and any missing parents (like mkdir -p).
func (s *Service) MakeDir(_ context.Context, req *connect.Request[agentv1.MakeDirRequest]) (*connect.Response[agentv1.MakeDirResponse], error) {
	p, err := s.resolveNonEmpty("path", req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	mode := os.FileMode(0o755)
	if m := req.Msg.GetMode(); m != 0 {
		mode = goMode(m)
	}
	uid, gid, err := s.owner(req.Msg.GetUser())
	if err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(p); err == nil && !fi.IsDir() {
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("make directory %s: a %s exists there", p, kindOf(fi)))
	}
	created, err := fsErrors.MkdirAll(p, mode, uid, gid)
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, toConnect("stat", p, err)
	}
	return connect.NewResponse(&agentv1.MakeDirResponse{
		Entry:   entryInfo(p, fi, s.cfg.Users.Owners()),
		Created: len(created) > 0,
	}), nil
}

func kindOf(fi os.FileInfo) string {
	switch {
	case fi.Mode().IsRegular():
		return "file"
	case fi.IsDir():
		return "directory"
	case fi.Mode()&os.ModeSymlink != 0:
		return "symlink"
	default:
		return "special file"
	}
}
