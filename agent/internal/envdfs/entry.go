package envdfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/warrenhq/warren/agent/internal/users"
	fspb "github.com/warrenhq/warren/api/gen/filesystem"
)

// statEntry describes path without following a final symlink.
func statEntry(path string, o users.Owners) (*fspb.EntryInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	return entryInfo(path, fi, o), nil
}

// entryInfo describes path from its Lstat result the way envd does: a
// symlink carries the fully resolved target, and its type and mode are the
// target's (a dangling link has no type, which the SDKs skip in listings);
// permissions is Go's rendering of the link's own mode ("Lrwxrwxrwx").
func entryInfo(path string, fi fs.FileInfo, o users.Owners) *fspb.EntryInfo {
	m := fi.Mode()
	e := &fspb.EntryInfo{
		Name:         filepath.Base(path),
		Type:         fileType(m),
		Path:         path,
		Size:         fi.Size(),
		Mode:         uint32(m.Perm()),
		Permissions:  m.String(),
		ModifiedTime: timestamppb.New(fi.ModTime()),
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Owner = o.User(st.Uid)
		e.Group = o.Group(st.Gid)
	}
	if m&fs.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(path)
		if err != nil {
			target = path
		}
		e.SymlinkTarget = &target
		e.Type, e.Mode = fspb.FileType_FILE_TYPE_UNSPECIFIED, 0
		if tfi, err := os.Stat(path); err == nil {
			e.Type, e.Mode = fileType(tfi.Mode()), uint32(tfi.Mode().Perm())
		}
		return e // user.* xattrs cannot be set on a symlink itself
	}
	e.Metadata = readMetadata(path)
	return e
}

func fileType(m fs.FileMode) fspb.FileType {
	switch {
	case m.IsRegular():
		return fspb.FileType_FILE_TYPE_FILE
	case m.IsDir():
		return fspb.FileType_FILE_TYPE_DIRECTORY
	default:
		return fspb.FileType_FILE_TYPE_UNSPECIFIED
	}
}
