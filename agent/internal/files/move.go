package files

import (
	"context"
	"os"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
)

// Move renames source to destination, replacing a file (or an empty
// directory) already there, like rename(2).
func (s *Service) Move(_ context.Context, req *connect.Request[agentv1.MoveRequest]) (*connect.Response[agentv1.MoveResponse], error) {
	src, err := s.resolveNonEmpty("source", req.Msg.GetSource())
	if err != nil {
		return nil, err
	}
	dst, err := s.resolveNonEmpty("destination", req.Msg.GetDestination())
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(src); err != nil {
		return nil, toConnect("move", src, err)
	}
	if err := os.Rename(src, dst); err != nil {
		return nil, toConnect("move "+src+" to", dst, err)
	}
	fi, err := os.Lstat(dst)
	if err != nil {
		return nil, toConnect("stat", dst, err)
	}
	return connect.NewResponse(&agentv1.MoveResponse{Entry: entryInfo(dst, fi, s.cfg.Users.Owners())}), nil
}
