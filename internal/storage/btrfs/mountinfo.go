package btrfs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// mountEntry is the part of one /proc/self/mountinfo line warren needs.
type mountEntry struct {
	MountPoint string
	FSType     string
	Source     string
}

// mountAt returns the topmost mount whose mount point is exactly path (which
// must be absolute and free of symlinks), or ok=false.
func mountAt(path string) (m mountEntry, ok bool, err error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return m, false, fmt.Errorf("read mount table: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		e, good := parseMountinfoLine(sc.Text())
		if good && e.MountPoint == path {
			m, ok = e, true // later lines are mounted on top of earlier ones
		}
	}
	return m, ok, sc.Err()
}

// parseMountinfoLine parses "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw".
func parseMountinfoLine(line string) (mountEntry, bool) {
	fields := strings.Fields(line)
	sep := -1
	for i, f := range fields {
		if f == "-" && i >= 6 {
			sep = i
			break
		}
	}
	if sep < 0 || len(fields) < sep+3 {
		return mountEntry{}, false
	}
	return mountEntry{
		MountPoint: unescapeMountinfo(fields[4]),
		FSType:     fields[sep+1],
		Source:     unescapeMountinfo(fields[sep+2]),
	}, true
}

// unescapeMountinfo undoes the kernel's octal escapes (\040 for space, ...).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
