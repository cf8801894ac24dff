package envdfs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"connectrpc.com/connect"

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
	depth := max(req.Msg.GetDepth(), 1)
	o := ownersOf(s.cfg.Users)
	var out []*fspb.EntryInfo
	var walk func(dir string, level uint32) error
	walk = func(dir string, level uint32) error {
		ents, err := os.ReadDir(dir)
		if err != nil {
			if dir != root {
				return nil // gone or unreadable meanwhile: listed, not entered
			}
			return fsError("list", dir, err)
		}
		for _, de := range ents {
			if len(out) >= maxListEntries {
				return connect.NewError(connect.CodeResourceExhausted,
					fmt.Errorf("list %s: more than %d entries; list a subdirectory or use a smaller depth", root, maxListEntries))
			}
			info, err := de.Info()
			if err != nil {
				continue // removed while listing
			}
			p := filepath.Join(dir, de.Name())
			out = append(out, entryInfo(p, info, o))
			if de.IsDir() && level < depth {
				if err := walk(p, level+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(root, 1); err != nil {
		return nil, err
	}
	return connect.NewResponse(&fspb.ListDirResponse{Entries: out}), nil
}
