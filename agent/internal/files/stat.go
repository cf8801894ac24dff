package files

import (
	"context"
	"os"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
)

// Stat describes one path; a symlink is described, not followed.
func (s *Service) Stat(_ context.Context, req *connect.Request[agentv1.StatRequest]) (*connect.Response[agentv1.StatResponse], error) {
	p, err := s.resolve(req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, toConnect("stat", p, err)
	}
	return connect.NewResponse(&agentv1.StatResponse{Entry: entryInfo(p, fi, s.cfg.Users.Owners())}), nil
}
