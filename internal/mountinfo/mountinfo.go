// Package mountinfo reads the mount table (/proc/self/mountinfo).
package mountinfo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Mount is the part of one mountinfo line warren needs.
type Mount struct {
	MountPoint string
	FSType     string
	Source     string
	// SuperOptions are the filesystem's own options (the last field), as
	// in "rw,nsdelegate".
	SuperOptions []string
}

// Read returns every mount, in the kernel's order (a later line is mounted
// on top of an earlier one at the same point).
func Read() ([]Mount, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	var out []Mount
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if m, ok := ParseLine(sc.Text()); ok {
			out = append(out, m)
		}
	}
	return out, sc.Err()
}

// At returns the topmost mount whose mount point is exactly path (absolute,
// free of symlinks), or ok=false.
func At(path string) (m Mount, ok bool, err error) {
	all, err := Read()
	if err != nil {
		return m, false, err
	}
	for _, e := range all {
		if e.MountPoint == path {
			m, ok = e, true
		}
	}
	return m, ok, nil
}

// Under lists the mount points at or below dir.
func Under(dir string) ([]string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	all, err := Read()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range all {
		if m.MountPoint == abs || strings.HasPrefix(m.MountPoint, abs+"/") {
			out = append(out, m.MountPoint)
		}
	}
	return out, nil
}

// ParseLine parses "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw".
func ParseLine(line string) (Mount, bool) {
	fields := strings.Fields(line)
	sep := -1
	for i, f := range fields {
		if f == "-" && i >= 6 {
			sep = i
			break
		}
	}
	if sep < 0 || len(fields) < sep+3 {
		return Mount{}, false
	}
	m := Mount{
		MountPoint: unescape(fields[4]),
		FSType:     fields[sep+1],
		Source:     unescape(fields[sep+2]),
	}
	if len(fields) > sep+3 {
		m.SuperOptions = strings.Split(fields[sep+3], ",")
	}
	return m, true
}

// unescape undoes the kernel's octal escapes (\040 for a space, ...).
func unescape(s string) string {
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

// DetachUnder lazily unmounts every mount below dir, and dir itself unless
// keepTop, deepest first. A read of mountinfo while other mounts change
// can miss a line (the kernel's seq_file restarts), so it reads again
// until nothing is left, a few passes at most.
func DetachUnder(dir string, keepTop bool) error {
	dir = filepath.Clean(dir)
	for pass := 0; ; pass++ {
		mounts, err := Under(dir)
		if err != nil {
			return err
		}
		var errs []error
		left := 0
		// Deepest first: a longer mount point can sit on a shorter one.
		sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
		for _, mp := range mounts {
			if keepTop && mp == dir {
				continue // the top may be a mount of its own (a backend's business)
			}
			left++
			if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
			}
		}
		if left == 0 || len(errs) > 0 || pass == 4 {
			return errors.Join(errs...)
		}
	}
}
