package files

import (
	"context"
	"io/fs"
	"os"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/agent/internal/fsops"
	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
)

// ListDir lists a directory's entries, descending depth levels (0 and 1 both
// mean the directory's own entries). Symlinks to directories are listed but
// not descended, so a link cycle cannot loop.
func (s *Service) ListDir(_ context.Context, req *connect.Request[agentv1.ListDirRequest]) (*connect.Response[agentv1.ListDirResponse], error) {
	root, err := s.resolve(req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, toConnect("list", root, err)
	}
	if !fi.IsDir() {
		return nil, failedPrecondition("list %s: not a directory (use Stat or ReadFile for a file)", root)
	}
	o := s.cfg.Users.Owners()
	var out []*agentv1.EntryInfo
	w := fsops.Walk{
		Depth:      max(req.Msg.GetDepth(), 1),
		Limit:      maxListEntries,
		SkipSubdir: os.IsPermission, // an unreadable subdirectory is listed but not entered
		Errors:     fsErrors,
	}
	if err := w.Run(root, func(p string, info fs.FileInfo) { out = append(out, entryInfo(p, info, o)) }); err != nil {
		return nil, err
	}
	return connect.NewResponse(&agentv1.ListDirResponse{Entries: out}), nil
}
