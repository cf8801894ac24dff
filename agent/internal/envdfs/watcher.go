package envdfs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	fspb "github.com/warrenhq/warren/api/gen/filesystem"
)

// A watcher turns inotify events below one directory into envd's event
// types, the way envd's fsnotify does: create and moved-to are CREATE,
// modify is WRITE, delete is REMOVE, moved-from is RENAME, attrib is CHMOD.
// Recursive watchers watch every subdirectory, including ones created or
// moved in later; what such a directory already holds when its watch is
// added is reported as created, so `mkdir -p a/b && touch a/b/f` is not lost.

var (
	// errWatchedDirGone ends a watch whose directory was removed.
	errWatchedDirGone = errors.New("the watched directory was removed")
	// errOverflow: the kernel's event queue overflowed and events were lost.
	errOverflow = errors.New("events were lost: the sandbox produced them faster than they were read")
)

const watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_DELETE |
	unix.IN_DELETE_SELF | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// fsEvent is one change, at an absolute path.
type fsEvent struct {
	path string
	op   fspb.EventType
}

type watcher struct {
	root      string
	recursive bool
	file      *os.File // the inotify descriptor, read through Go's poller
	raw       syscall.RawConn
	closeOnce sync.Once

	// Owned by the goroutine in run (and newWatcher before it).
	dirs   map[int32]string // watch descriptor → directory
	wds    map[string]int32 // directory → watch descriptor
	rootWd int32
	moves  map[uint32]string // rename cookie → upload temp file moved away
}

// newWatcher starts watching root, a directory.
func newWatcher(root string, recursive bool) (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, watchError(root, err)
	}
	f := os.NewFile(uintptr(fd), "inotify")
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("watch %s: %w", root, err)
	}
	w := &watcher{
		root: root, recursive: recursive, file: f, raw: raw,
		dirs: map[int32]string{}, wds: map[string]int32{}, moves: map[uint32]string{},
	}
	if _, err := w.addTree(root, false); err != nil {
		f.Close()
		return nil, watchError(root, err)
	}
	w.rootWd = w.wds[root]
	return w, nil
}

// close stops the watcher; run then returns nil. Safe to call many times
// and from any goroutine.
func (w *watcher) close() {
	w.closeOnce.Do(func() { w.file.Close() })
}

// run reads events until the watcher is closed (nil), the watched
// directory is removed (errWatchedDirGone), emit fails (its error), or
// something breaks.
func (w *watcher) run(emit func(fsEvent) error) error {
	buf := make([]byte, 64<<10)
	for {
		n, err := w.file.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return nil
			}
			return fmt.Errorf("read inotify events: %w", err)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(buf[off:]))
			mask := binary.NativeEndian.Uint32(buf[off+4:])
			cookie := binary.NativeEndian.Uint32(buf[off+8:])
			nameLen := int(binary.NativeEndian.Uint32(buf[off+12:]))
			start := off + unix.SizeofInotifyEvent
			end := min(start+nameLen, n)
			name := strings.TrimRight(string(buf[start:end]), "\x00")
			off = start + nameLen
			if err := w.handle(wd, mask, cookie, name, emit); err != nil {
				return err
			}
		}
	}
}

func (w *watcher) handle(wd int32, mask, cookie uint32, name string, emit func(fsEvent) error) error {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		return errOverflow
	}
	dir, ok := w.dirs[wd]
	if !ok {
		return nil // a watch already forgotten
	}
	if mask&unix.IN_IGNORED != 0 {
		w.forget(wd, dir)
		if wd == w.rootWd {
			return errWatchedDirGone
		}
		return nil
	}
	if name == "" && wd != w.rootWd {
		return nil // a subdirectory's own event: its parent's watch reports it
	}
	if isUploadTemp(name) {
		if mask&unix.IN_MOVED_FROM != 0 && cookie != 0 {
			if len(w.moves) >= 64 {
				clear(w.moves) // pairs that never completed
			}
			w.moves[cookie] = name
		}
		return nil
	}
	full := dir
	if name != "" {
		full = filepath.Join(dir, name)
	}
	if mask&unix.IN_MOVED_TO != 0 {
		if from, ok := w.moves[cookie]; ok {
			// An upload renamed its complete temporary file into place:
			// report it as envd's in-place write would appear.
			delete(w.moves, cookie)
			if strings.HasPrefix(from, uploadNewPrefix) {
				if err := emit(fsEvent{full, fspb.EventType_EVENT_TYPE_CREATE}); err != nil {
					return err
				}
			}
			return emit(fsEvent{full, fspb.EventType_EVENT_TYPE_WRITE})
		}
	}
	var found []string
	if w.recursive && mask&unix.IN_ISDIR != 0 && name != "" {
		switch {
		case mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
			var err error
			if found, err = w.addTree(full, true); err != nil {
				return watchError(full, err)
			}
		case mask&unix.IN_MOVED_FROM != 0:
			w.removeTree(full)
		}
	}
	for _, op := range opsOf(mask) {
		if err := emit(fsEvent{full, op}); err != nil {
			return err
		}
	}
	for _, p := range found {
		if err := emit(fsEvent{p, fspb.EventType_EVENT_TYPE_CREATE}); err != nil {
			return err
		}
	}
	return nil
}

// opsOf lists the event types of one inotify event, in envd's order.
func opsOf(mask uint32) []fspb.EventType {
	var ops []fspb.EventType
	if mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
		ops = append(ops, fspb.EventType_EVENT_TYPE_CREATE)
	}
	if mask&(unix.IN_MOVED_FROM|unix.IN_MOVE_SELF) != 0 {
		ops = append(ops, fspb.EventType_EVENT_TYPE_RENAME)
	}
	if mask&unix.IN_ATTRIB != 0 {
		ops = append(ops, fspb.EventType_EVENT_TYPE_CHMOD)
	}
	if mask&unix.IN_MODIFY != 0 {
		ops = append(ops, fspb.EventType_EVENT_TYPE_WRITE)
	}
	if mask&(unix.IN_DELETE|unix.IN_DELETE_SELF) != 0 {
		ops = append(ops, fspb.EventType_EVENT_TYPE_REMOVE)
	}
	return ops
}

// addTree watches dir and, for a recursive watcher, every directory below
// it. With report it returns what it found below dir. Only the watch limit
// is an error below the root: a subdirectory that vanished meanwhile is not.
func (w *watcher) addTree(dir string, report bool) ([]string, error) {
	if err := w.add(dir); err != nil {
		if dir != w.root && !errors.Is(err, unix.ENOSPC) {
			return nil, nil
		}
		return nil, err
	}
	if !w.recursive {
		return nil, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil // unreadable or gone: watched as far as possible
	}
	var found []string
	for _, de := range ents {
		p := filepath.Join(dir, de.Name())
		if isUploadTemp(de.Name()) {
			continue
		}
		if report {
			found = append(found, p)
		}
		if de.IsDir() {
			sub, err := w.addTree(p, report)
			if err != nil {
				return found, err
			}
			found = append(found, sub...)
		}
	}
	return found, nil
}

func (w *watcher) add(dir string) error {
	mask := uint32(watchMask)
	if dir != w.root {
		mask |= unix.IN_DONT_FOLLOW // the root may be a symlink; nothing below is followed
	}
	var wd int
	var addErr error
	if err := w.raw.Control(func(fd uintptr) {
		wd, addErr = unix.InotifyAddWatch(int(fd), dir, mask)
	}); err != nil {
		return err
	}
	if addErr != nil {
		return addErr
	}
	w.dirs[int32(wd)] = dir
	w.wds[dir] = int32(wd)
	return nil
}

// removeTree stops watching dir and everything below it: it moved out of
// the watched tree (or within it, and the move's other half re-adds it).
func (w *watcher) removeTree(dir string) {
	for p, wd := range w.wds {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			_ = w.raw.Control(func(fd uintptr) { _, _ = unix.InotifyRmWatch(int(fd), uint32(wd)) })
			w.forget(wd, p)
		}
	}
}

func (w *watcher) forget(wd int32, dir string) {
	delete(w.dirs, wd)
	if w.wds[dir] == wd {
		delete(w.wds, dir)
	}
}

// watchError explains inotify's resource errors, which fsError would
// misread (ENOSPC here is the watch limit, not a full disk).
func watchError(path string, err error) error {
	switch {
	case errors.Is(err, unix.ENOSPC):
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("watch %s: the sandbox's inotify watch limit (fs.inotify.max_user_watches) is reached; watch fewer or smaller trees", path))
	case errors.Is(err, unix.EMFILE):
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("watch %s: the sandbox's inotify instance limit (fs.inotify.max_user_instances) is reached; stop unused watchers", path))
	default:
		return fsError("watch", path, err)
	}
}
