package users

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Every Exec and every file listing resolves users, and reading and parsing
// /etc/passwd and /etc/group each time cost a measurable share of an Exec
// round trip. The parsed lines are kept while the file's identity (inode,
// size, mtime) is unchanged, so an edit inside the sandbox is seen at once.
var parsed = struct {
	sync.Mutex
	files map[string]parsedFile
}{files: map[string]parsedFile{}}

type parsedFile struct {
	ino   uint64
	size  int64
	mtime time.Time
	lines [][]string
}

// maxCachedFiles bounds the cache; the agent only ever reads two files.
const maxCachedFiles = 16

// scanColon calls fn with the colon-separated fields of each non-comment line.
// The files come from the sandbox, so lines are bounded and malformed ones
// skipped by the callers.
func scanColon(path string, fn func([]string)) error {
	lines, err := colonLines(path)
	if err != nil {
		return err
	}
	for _, f := range lines {
		fn(f)
	}
	return nil
}

func colonLines(path string) ([][]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = st.Ino
	}
	parsed.Lock()
	c, ok := parsed.files[path]
	parsed.Unlock()
	if ok && c.ino == ino && c.size == fi.Size() && c.mtime.Equal(fi.ModTime()) {
		return c.lines, nil
	}
	lines, err := readColon(path)
	if err != nil {
		return nil, err
	}
	parsed.Lock()
	if len(parsed.files) >= maxCachedFiles {
		parsed.files = map[string]parsedFile{}
	}
	parsed.files[path] = parsedFile{ino: ino, size: fi.Size(), mtime: fi.ModTime(), lines: lines}
	parsed.Unlock()
	return lines, nil
}

func readColon(path string) ([][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	var lines [][]string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 64*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		lines = append(lines, strings.Split(line, ":"))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return lines, nil
}
