package envdfs

import (
	"context"

	"connectrpc.com/connect"

	fspb "github.com/warrenhq/warren/api/gen/filesystem"
)

// Stat describes one path; a symlink is described, not followed.
func (s *Service) Stat(_ context.Context, req *connect.Request[fspb.StatRequest]) (*connect.Response[fspb.StatResponse], error) {
	c, err := s.callerOf(req.Header())
	if err != nil {
		return nil, err
	}
	p, err := c.resolve(req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	e, err := statEntry(p, s.cfg.Users.Owners())
	if err != nil {
		return nil, fsError("stat", p, err)
	}
	return connect.NewResponse(&fspb.StatResponse{Entry: e}), nil
}
