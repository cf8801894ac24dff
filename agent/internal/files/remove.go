package files

import (
	"context"
	"errors"
	"os"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
)

// Remove deletes a file, a symlink (not its target) or a whole directory tree.
func (s *Service) Remove(_ context.Context, req *connect.Request[agentv1.RemoveRequest]) (*connect.Response[agentv1.RemoveResponse], error) {
	p, err := s.resolveNonEmpty("path", req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	if p == "/" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("refusing to remove / (it would wreck the sandbox)"))
	}
	if _, err := os.Lstat(p); err != nil {
		return nil, toConnect("remove", p, err)
	}
	if err := os.RemoveAll(p); err != nil {
		return nil, toConnect("remove", p, err)
	}
	return connect.NewResponse(&agentv1.RemoveResponse{}), nil
}
