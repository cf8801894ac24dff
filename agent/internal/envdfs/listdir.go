package envdfs

import (
	"context"
	"io/fs"
	"os"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/agent/internal/fsops"
	fspb "github.com/warrenhq/warren/api/gen/filesystem"
)

// ListDir lists a directory depth levels deep (0 and 1 both mean its own
// entries), depth first in name order like envd. A symlink given as the
// directory is followed, but entry paths keep the requested spelling;
// symlinks inside are listed, never descended, so a link cycle cannot loop.
func (s *Service) ListDir(_ context.Context, req *connect.Request[fspb.ListDirRequest]) (*connect.Response[fspb.ListDirResponse], error) {
	c, err := s.callerOf(req.Header())
	if err != nil {
		return nil, err
	}
	root, err := c.resolve(req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fsError("list", root, err)
	}
	if !fi.IsDir() {
		return nil, invalidArg("list %s: path is not a directory (use Stat for a file)", root)
	}
	o := s.cfg.Users.Owners()
	var out []*fspb.EntryInfo
	w := fsops.Walk{
		Depth:      max(req.Msg.GetDepth(), 1),
		Limit:      maxListEntries,
		SkipSubdir: func(error) bool { return true }, // gone or unreadable meanwhile: listed, not entered
		Errors:     fsErrors,
	}
	if err := w.Run(root, func(p string, info fs.FileInfo) { out = append(out, entryInfo(p, info, o)) }); err != nil {
		return nil, err
	}
	return connect.NewResponse(&fspb.ListDirResponse{Entries: out}), nil
}
