package tools

import (
	"bytes"
	"context"
	"encoding/binary"
	"io/fs"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// fileBatch is how many files of one directory one job visits: a
	// directory of 100k files is shared among the workers rather than left
	// to one.
	fileBatch = 256
	// direntBuf is the getdents buffer of one worker.
	direntBuf = 32 << 10
)

// treeWalk visits a directory tree with several goroutines. Directories are
// read and files visited in no particular order; callers sort what they keep.
// Symlinks are visited but never followed, so a link cycle cannot loop and
// a link cannot lead the walk elsewhere.
//
// Searching 100k small files is mostly system calls, so the walk makes as
// few as it can: directories are read with getdents directly (os.File
// would also try, and fail, to register each with the poller), and files
// are opened relative to their directory's descriptor, which spares the
// kernel a lookup of the whole path per file.
type treeWalk struct {
	// enter says whether to descend into the directory at rel (relative to
	// the root, slash-separated); nil enters every directory.
	enter func(rel, name string) bool
	// visit is called concurrently for every entry, directories included;
	// worker numbers the calling goroutine, 0 ≤ worker < workers.
	visit func(worker int, e *entry)
	// workers is the number of goroutines; 0 picks one from the CPUs.
	workers int

	unreadable atomic.Int64 // directories that could not be read
	stopped    atomic.Bool

	mu      sync.Mutex
	cond    *sync.Cond
	jobs    []walkJob
	pending int // jobs queued or running
}

// entry is one directory entry being visited.
type entry struct {
	dirfd int    // its directory, open while visit runs
	dir   string // its directory's path
	name  string
	rel   string      // slash-separated, relative to the walk's root
	typ   fs.FileMode // type bits only: 0 for a regular file
}

func (e *entry) path() string {
	if e.dir == "/" {
		return "/" + e.name
	}
	return e.dir + "/" + e.name
}

// modTime is the entry's mtime (lstat); zero when it has gone.
func (e *entry) modTime() time.Time {
	var st unix.Stat_t
	if err := unix.Fstatat(e.dirfd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return time.Time{}
	}
	return time.Unix(st.Mtim.Unix())
}

// pseudoFS are the kernel's file systems: a walk of the whole tree does not
// enter them (reading /proc/kcore or a sysfs attribute can take forever or
// block), though a walk started inside one reads it.
var pseudoFS = map[string]bool{"/proc": true, "/sys": true, "/dev": true}

type walkJob struct {
	dir, rel string
	files    []dirent // nil: read dir; else visit these of its entries
	root     bool     // the root may be a symlink to the directory to walk
}

type dirent struct {
	name string
	typ  fs.FileMode
}

func walkWorkers() int {
	return min(max(2*runtime.GOMAXPROCS(0), 4), 16)
}

// run walks the tree below root (a directory) until every entry has been
// visited, stop was called, or ctx ends.
func (w *treeWalk) run(ctx context.Context, root string) {
	if w.workers <= 0 {
		w.workers = walkWorkers()
	}
	w.cond = sync.NewCond(&w.mu)
	defer context.AfterFunc(ctx, w.stop)()
	w.push(walkJob{dir: root, root: true})
	var wg sync.WaitGroup
	for i := range w.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, direntBuf)
			for {
				j, ok := w.pop()
				if !ok {
					return
				}
				w.do(i, j, buf)
				w.done()
			}
		}()
	}
	wg.Wait()
}

// stop ends the walk early; visits already running finish.
func (w *treeWalk) stop() {
	w.stopped.Store(true)
	w.mu.Lock()
	w.cond.Broadcast()
	w.mu.Unlock()
}

func (w *treeWalk) push(j walkJob) {
	w.mu.Lock()
	w.jobs = append(w.jobs, j)
	w.pending++
	w.cond.Signal()
	w.mu.Unlock()
}

func (w *treeWalk) pop() (walkJob, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.jobs) == 0 && w.pending > 0 && !w.stopped.Load() {
		w.cond.Wait()
	}
	if len(w.jobs) == 0 || w.stopped.Load() {
		return walkJob{}, false
	}
	j := w.jobs[len(w.jobs)-1]
	w.jobs = w.jobs[:len(w.jobs)-1]
	return j, true
}

func (w *treeWalk) done() {
	w.mu.Lock()
	w.pending--
	if w.pending == 0 {
		w.cond.Broadcast()
	}
	w.mu.Unlock()
}

func (w *treeWalk) do(worker int, j walkJob, buf []byte) {
	fd, err := openDir(j.dir, j.root)
	if err != nil {
		if j.files == nil {
			w.unreadable.Add(1)
		}
		return
	}
	defer unix.Close(fd)
	if j.files != nil {
		w.visitAll(worker, fd, j.dir, j.rel, j.files)
		return
	}
	var files []dirent
	err = readDirents(fd, buf, func(name string, typ fs.FileMode) {
		if typ != fs.ModeDir {
			files = append(files, dirent{name: name, typ: typ})
			return
		}
		e := &entry{dirfd: fd, dir: j.dir, name: name, rel: join(j.rel, name), typ: typ}
		w.visit(worker, e)
		if pseudoFS[e.path()] {
			return // a walk from / does not read the kernel's files
		}
		if w.enter == nil || w.enter(e.rel, name) {
			w.push(walkJob{dir: e.path(), rel: e.rel})
		}
	})
	if err != nil {
		w.unreadable.Add(1)
	}
	for len(files) > fileBatch {
		w.push(walkJob{dir: j.dir, rel: j.rel, files: files[len(files)-fileBatch:]})
		files = files[:len(files)-fileBatch]
	}
	w.visitAll(worker, fd, j.dir, j.rel, files)
}

func (w *treeWalk) visitAll(worker, fd int, dir, rel string, files []dirent) {
	e := entry{dirfd: fd, dir: dir}
	for _, f := range files {
		if w.stopped.Load() {
			return
		}
		e.name, e.typ, e.rel = f.name, f.typ, join(rel, f.name)
		w.visit(worker, &e)
	}
}

func openDir(path string, follow bool) (int, error) {
	flags := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC
	if !follow {
		flags |= unix.O_NOFOLLOW
	}
	for {
		fd, err := unix.Open(path, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// readDirents calls fn for each entry of the open directory fd but . and
// .., with its type from the directory itself (lstat only where the file
// system does not say).
func readDirents(fd int, buf []byte, fn func(name string, typ fs.FileMode)) error {
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n <= 0 {
			return nil
		}
		for off := 0; off+19 <= n; {
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen == 0 || off+reclen > n {
				return nil // a malformed record: stop rather than loop
			}
			dtype := buf[off+18]
			name := buf[off+19 : off+reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			off += reclen
			if string(name) == "." || string(name) == ".." {
				continue
			}
			s := string(name)
			fn(s, direntType(fd, s, dtype))
		}
	}
}

func direntType(dirfd int, name string, dtype byte) fs.FileMode {
	switch dtype {
	case unix.DT_REG:
		return 0
	case unix.DT_DIR:
		return fs.ModeDir
	case unix.DT_LNK:
		return fs.ModeSymlink
	case unix.DT_FIFO:
		return fs.ModeNamedPipe
	case unix.DT_SOCK:
		return fs.ModeSocket
	case unix.DT_CHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.DT_BLK:
		return fs.ModeDevice
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fs.ModeIrregular
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return 0
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	}
	return fs.ModeIrregular
}

func join(rel, name string) string {
	if rel == "" {
		return name
	}
	return rel + "/" + name
}
