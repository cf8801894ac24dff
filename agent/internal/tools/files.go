package tools

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/agent/internal/fsops"
)

const (
	// sniffLen is how much of a file decides whether it is binary (git
	// looks at the first 8000 bytes the same way).
	sniffLen = 8 << 10
	// tempPrefix names the temporary files the tools write before renaming
	// them into place.
	tempPrefix  = ".warren-tool-"
	newFileMode = 0o644
	newDirMode  = 0o755
)

// isBinary reports whether sample (a file's first bytes) looks binary: it
// holds a NUL byte, or more than a tenth of it is control characters that
// text does not use.
func isBinary(sample []byte) bool {
	if len(sample) > sniffLen {
		sample = sample[:sniffLen]
	}
	if bytes.IndexByte(sample, 0) >= 0 {
		return true
	}
	odd := 0
	for _, b := range sample {
		if b < 0x20 && b != '\n' && b != '\r' && b != '\t' && b != '\f' && b != '\b' && b != 0x1b {
			odd++
		}
	}
	return odd*10 > len(sample)
}

// binaryRefusal is the message read and edit give for a binary file.
func binaryRefusal(path string, size int64, sample []byte) string {
	kind := http.DetectContentType(sample)
	if i := strings.IndexByte(kind, ';'); i >= 0 {
		kind = kind[:i]
	}
	return fmt.Sprintf("%s is a binary file (%s, detected as %s); this tool handles text files only. "+
		"Inspect it with bash instead (for example: file %s; xxd %s | head).", path, humanSize(size), kind, shellQuote(path), shellQuote(path))
}

// errText renders a filesystem error for a model: the operation, the path
// once, and the cause.
func errText(op, path string, err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	cause := fsops.Unwrap(err)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("%s %s: no such file or directory", op, path)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Sprintf("%s %s: a parent of the path is not a directory", op, path)
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return fmt.Sprintf("%s %s: %v (the sandbox's disk is full or over quota)", op, path, cause)
	}
	return fmt.Sprintf("%s %s: %v", op, path, cause)
}

// keptMode is the part of a file's mode a rewrite preserves.
func keptMode(fi fs.FileInfo) fs.FileMode {
	return fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}

// ownerOf is a file's uid and gid.
func ownerOf(fi fs.FileInfo) (uid, gid int) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), int(st.Gid)
	}
	return -1, -1
}

// stage writes data to a temporary file beside target with the given mode
// and owner (and the extended attributes of xattrsFrom, when set), ready to
// be renamed over target; the caller removes it if it does not rename it.
func stage(target string, data []byte, mode fs.FileMode, uid, gid int, xattrsFrom string) (string, error) {
	tmp, err := os.CreateTemp(filepath.Dir(target), tempPrefix+"*")
	if err != nil {
		return "", err
	}
	name := tmp.Name()
	okDone := false
	defer func() {
		if !okDone {
			tmp.Close()
			_ = os.Remove(name)
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return "", err
	}
	// chown before chmod: chown clears setuid and setgid bits.
	if err := tmp.Chown(uid, gid); err != nil {
		return "", err
	}
	if err := tmp.Chmod(mode); err != nil {
		return "", err
	}
	if xattrsFrom != "" {
		copyXattrs(xattrsFrom, tmp)
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	okDone = true
	return name, nil
}

// replace writes data over target atomically (a temporary file renamed into
// place), so a reader never sees half a file and a failure (a full disk, a
// quota) leaves the old one. An existing target's extended attributes (E2B's
// file metadata among them) carry over. On btrfs this costs about 0.1 ms
// more than writing in place.
func replace(target string, data []byte, mode fs.FileMode, uid, gid int, existed bool) error {
	from := ""
	if existed {
		from = target
	}
	tmp, err := stage(target, data, mode, uid, gid, from)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, target); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// copyXattrs copies src's extended attributes to dst, as far as the file
// system and the agent's privileges allow: a rewritten file should not lose
// them, but failing to keep one is no reason to fail the write.
func copyXattrs(src string, dst *os.File) {
	names, err := listXattrs(src)
	if err != nil || len(names) == 0 {
		return
	}
	rc, err := dst.SyscallConn()
	if err != nil {
		return
	}
	for _, name := range names {
		n, err := unix.Getxattr(src, name, nil)
		if err != nil || n < 0 {
			continue
		}
		val := make([]byte, n)
		if n, err = unix.Getxattr(src, name, val); err != nil {
			continue
		}
		_ = rc.Control(func(fd uintptr) { _ = unix.Fsetxattr(int(fd), name, val[:n], 0) })
	}
}

func listXattrs(path string) ([]string, error) {
	for range 3 { // the list may grow between the two calls
		n, err := unix.Listxattr(path, nil)
		if err != nil || n <= 0 {
			return nil, err
		}
		buf := make([]byte, n)
		n, err = unix.Listxattr(path, buf)
		if errors.Is(err, unix.ERANGE) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var names []string
		for _, b := range bytes.Split(buf[:n], []byte{0}) {
			if len(b) > 0 {
				names = append(names, string(b))
			}
		}
		return names, nil
	}
	return nil, unix.ERANGE
}

// resolveLink returns the file a symlink at path points to, so that writing
// through it changes the target and keeps the link; any other path, and a
// dangling link, is returned unchanged.
func resolveLink(path string) string {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return path
	}
	if t, err := filepath.EvalSymlinks(path); err == nil {
		return t
	}
	return path
}

// mkdirParents creates path's missing parent directories for the user.
func mkdirParents(path string, uid, gid int) ([]string, error) {
	return fsops.Errors(nil).MkdirAll(filepath.Dir(path), newDirMode, uid, gid)
}

func humanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:,@%=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
