package envdfs

import (
	"context"
	"fmt"
	"os"

	"connectrpc.com/connect"

	fspb "github.com/warrenhq/warren/api/gen/filesystem"
)

// MakeDir creates a directory and its missing parents, owned by the caller.
// An existing directory is AlreadyExists, which the SDKs turn into `false`.
func (s *Service) MakeDir(_ context.Context, req *connect.Request[fspb.MakeDirRequest]) (*connect.Response[fspb.MakeDirResponse], error) {
	c, p, err := s.callerAndField(req.Header(), "path", req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(p); err == nil {
		if fi.IsDir() {
			return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("directory %s already exists", p))
		}
		return nil, invalidArg("make directory %s: the path exists and is not a directory", p)
	}
	if _, err := mkdirAll(p, int(c.UID), int(c.GID)); err != nil {
		return nil, err
	}
	e, err := statEntry(p, s.cfg.Users.Owners())
	if err != nil {
		return nil, fsError("stat", p, err)
	}
	return connect.NewResponse(&fspb.MakeDirResponse{Entry: e}), nil
}
