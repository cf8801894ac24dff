package files

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"connectrpc.com/connect"

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
	depth := max(req.Msg.GetDepth(), 1)
	o := s.owners()
	var out []*agentv1.EntryInfo
	var walk func(dir string, level uint32) error
	walk = func(dir string, level uint32) error {
		ents, err := os.ReadDir(dir)
		if err != nil {
			if dir != root && os.IsPermission(err) {
				return nil // an unreadable subdirectory is listed but not entered
			}
			return toConnect("list", dir, err)
		}
		for _, de := range ents {
			p := filepath.Join(dir, de.Name())
			info, err := de.Info()
			if err != nil {
				continue // removed while listing
			}
			if len(out) >= maxListEntries {
				return connect.NewError(connect.CodeResourceExhausted,
					fmt.Errorf("list %s: more than %d entries; list a subdirectory or use a smaller depth", root, maxListEntries))
			}
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
	return connect.NewResponse(&agentv1.ListDirResponse{Entries: out}), nil
}
