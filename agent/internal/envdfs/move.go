package envdfs

import (
	"context"
	"os"
	"path/filepath"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/agent/internal/fsops"
	fspb "github.com/warrenhq/warren/api/gen/filesystem"
)

// Move renames source to destination like rename(2), creating the
// destination's missing parents for the caller, and describes the result.
func (s *Service) Move(_ context.Context, req *connect.Request[fspb.MoveRequest]) (*connect.Response[fspb.MoveResponse], error) {
	c, src, err := s.callerAndField(req.Header(), "source", req.Msg.GetSource())
	if err != nil {
		return nil, err
	}
	dst, err := c.resolveField("destination", req.Msg.GetDestination())
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(src); err != nil {
		return nil, fsError("move", src, err)
	}
	created, err := mkdirAll(filepath.Dir(dst), int(c.UID), int(c.GID))
	if err != nil {
		return nil, err
	}
	if err := os.Rename(src, dst); err != nil {
		fsops.RemoveDirs(created)
		return nil, fsError("move "+src+" to", dst, err)
	}
	e, err := statEntry(dst, s.cfg.Users.Owners())
	if err != nil {
		return nil, fsError("stat", dst, err)
	}
	return connect.NewResponse(&fspb.MoveResponse{Entry: e}), nil
}
