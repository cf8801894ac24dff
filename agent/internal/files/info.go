package files

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/warrenhq/warren/agent/internal/users"
	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
)

// entryInfo describes path (not following a final symlink) from fi.
func entryInfo(path string, fi fs.FileInfo, o users.Owners) *agentv1.EntryInfo {
	e := &agentv1.EntryInfo{
		Name:             filepath.Base(path),
		Path:             path,
		Size:             fi.Size(),
		Mode:             modeBits(fi.Mode()),
		ModifiedUnixNano: fi.ModTime().UnixNano(),
	}
	switch {
	case fi.Mode().IsRegular():
		e.Type = agentv1.FileType_FILE_TYPE_FILE
	case fi.IsDir():
		e.Type = agentv1.FileType_FILE_TYPE_DIRECTORY
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type = agentv1.FileType_FILE_TYPE_SYMLINK
		e.SymlinkTarget, _ = os.Readlink(path)
	default:
		e.Type = agentv1.FileType_FILE_TYPE_OTHER
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Owner = o.User(st.Uid)
		e.Group = o.Group(st.Gid)
	}
	return e
}

// modeBits is the permission bits plus setuid/setgid/sticky in their Unix
// positions (Go keeps the last three elsewhere).
func modeBits(m fs.FileMode) uint32 {
	b := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		b |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		b |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

// goMode is the inverse of modeBits.
func goMode(b uint32) fs.FileMode {
	m := fs.FileMode(b & 0o777)
	if b&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if b&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if b&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}
