package envdfs

import (
	"context"
	"os"

	"connectrpc.com/connect"

	fspb "github.com/warrenhq/warren/api/gen/filesystem"
)

// Remove deletes a file, a symlink (not its target) or a whole tree. Like
// envd (and rm -f), a path that does not exist is not an error: the SDKs'
// own tests remove missing files and expect success.
func (s *Service) Remove(_ context.Context, req *connect.Request[fspb.RemoveRequest]) (*connect.Response[fspb.RemoveResponse], error) {
	_, p, err := s.callerAndField(req.Header(), "path", req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	if p == "/" {
		return nil, invalidArg("refusing to remove / (it would wreck the sandbox)")
	}
	if err := os.RemoveAll(p); err != nil {
		return nil, fsError("remove", p, err)
	}
	return connect.NewResponse(&fspb.RemoveResponse{}), nil
}
