package envdfs

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// File metadata (envd 0.6.2) is kept as extended attributes in envd's own
// namespace, so metadata set inside the sandbox with setfattr shows too.
const (
	metadataXattrPrefix = "user.e2b."
	metadataHeader      = "X-Metadata-"
	// maxMetadataKeyLen: Linux limits an xattr name to 255 bytes.
	maxMetadataKeyLen = 255 - len(metadataXattrPrefix)
	// maxMetadataTotal: ext4 keeps all of an inode's xattrs in one 4 KiB
	// block, so a larger set would fail late with ENOSPC.
	maxMetadataTotal = 4096
)

// metadataFromHeaders collects X-Metadata-<key> headers; keys are lowercase
// (HTTP header names are case-insensitive) and the first value wins.
func metadataFromHeaders(h http.Header) (map[string]string, error) {
	var md map[string]string
	for name, values := range h {
		if len(name) <= len(metadataHeader) || !strings.EqualFold(name[:len(metadataHeader)], metadataHeader) || len(values) == 0 {
			continue
		}
		if md == nil {
			md = map[string]string{}
		}
		md[strings.ToLower(name[len(metadataHeader):])] = values[0]
	}
	return md, validateMetadata(md)
}

func validateMetadata(md map[string]string) error {
	total := 0
	for k, v := range md {
		if len(k) > maxMetadataKeyLen {
			return invalidArg("metadata key %q is longer than %d bytes", k, maxMetadataKeyLen)
		}
		if i := nonPrintable(k); i >= 0 {
			return invalidArg("metadata key %q has a byte that is not printable ASCII at offset %d", k, i)
		}
		if i := nonPrintable(v); i >= 0 {
			return invalidArg("metadata value for key %q has a byte that is not printable ASCII at offset %d", k, i)
		}
		total += len(metadataXattrPrefix) + len(k) + len(v)
	}
	if total > maxMetadataTotal {
		return invalidArg("metadata totals %d bytes; at most %d fit on one file", total, maxMetadataTotal)
	}
	return nil
}

func nonPrintable(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return i
		}
	}
	return -1
}

// readMetadata returns the file's metadata, or nil when it has none or its
// filesystem has no xattrs. Values set from inside the sandbox may be any
// bytes; entries that are not UTF-8 are skipped because a protobuf string
// must be.
func readMetadata(path string) map[string]string {
	names, err := xattrNames(func(b []byte) (int, error) { return unix.Llistxattr(path, b) })
	if err != nil {
		return nil
	}
	var md map[string]string
	for _, n := range names {
		key, ok := strings.CutPrefix(n, metadataXattrPrefix)
		if !ok || key == "" {
			continue
		}
		v, err := xattrValue(path, n)
		if err != nil || !utf8.ValidString(key) || !utf8.Valid(v) {
			continue
		}
		if md == nil {
			md = map[string]string{}
		}
		md[key] = string(v)
	}
	return md
}

// writeMetadata makes f's metadata exactly md (a nil md clears it). It
// returns what is now stored: nil when the filesystem has no user xattrs,
// which is not an error because metadata is best effort there.
func writeMetadata(f *os.File, md map[string]string) (map[string]string, error) {
	fd := int(f.Fd())
	names, err := xattrNames(func(b []byte) (int, error) { return unix.Flistxattr(fd, b) })
	if xattrUnsupported(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list xattrs: %w", err)
	}
	for _, n := range names {
		key, ok := strings.CutPrefix(n, metadataXattrPrefix)
		if _, keep := md[key]; !ok || keep {
			continue
		}
		if err := unix.Fremovexattr(fd, n); err != nil && !errors.Is(err, unix.ENODATA) {
			return nil, fmt.Errorf("remove xattr %s: %w", n, err)
		}
	}
	for k, v := range md {
		if err := unix.Fsetxattr(fd, metadataXattrPrefix+k, []byte(v), 0); err != nil {
			if xattrUnsupported(err) {
				return nil, nil
			}
			return nil, fmt.Errorf("set metadata %q: %w", k, err)
		}
	}
	if len(md) == 0 {
		return nil, nil
	}
	return md, nil
}

// xattrNames calls a listxattr-style function with a growing buffer.
func xattrNames(list func([]byte) (int, error)) ([]string, error) {
	size, err := list(nil)
	for tries := 0; ; tries++ {
		if err != nil {
			return nil, err
		}
		if size == 0 {
			return nil, nil
		}
		buf := make([]byte, size)
		var n int
		n, err = list(buf)
		if errors.Is(err, unix.ERANGE) && tries < 3 {
			size, err = list(nil) // grew meanwhile
			continue
		}
		if err != nil {
			return nil, err
		}
		var names []string
		for _, n := range strings.Split(string(buf[:n]), "\x00") {
			if n != "" {
				names = append(names, n)
			}
		}
		return names, nil
	}
}

func xattrValue(path, name string) ([]byte, error) {
	for tries := 0; tries < 3; tries++ {
		size, err := unix.Lgetxattr(path, name, nil)
		if err != nil {
			return nil, err
		}
		buf := make([]byte, size)
		n, err := unix.Lgetxattr(path, name, buf)
		if errors.Is(err, unix.ERANGE) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
	return nil, unix.ERANGE
}

func xattrUnsupported(err error) bool {
	return errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP)
}
