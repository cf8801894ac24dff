package envdfs

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	fspb "github.com/warrenhq/warren/api/gen/filesystem"
)

// WatchDir streams changes below a directory: a start event once the watch
// is in place (the SDKs wait for it), then filesystem events and keepalives
// every Keepalive-Ping-Interval seconds. The stream ends when the client
// goes, or cleanly when the watched directory is removed.
func (s *Service) WatchDir(ctx context.Context, req *connect.Request[fspb.WatchDirRequest], stream *connect.ServerStream[fspb.WatchDirResponse]) error {
	c, err := s.callerOf(req.Header())
	if err != nil {
		return err
	}
	root, err := watchRoot(c, req.Msg.GetPath(), req.Msg.GetAllowNetworkMounts())
	if err != nil {
		return err
	}
	w, err := newWatcher(root, req.Msg.GetRecursive())
	if err != nil {
		return err
	}
	defer w.close()

	var sendMu sync.Mutex
	send := func(m *fspb.WatchDirResponse) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(m)
	}
	if err := send(&fspb.WatchDirResponse{Event: &fspb.WatchDirResponse_Start{Start: &fspb.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(keepaliveInterval(req.Header()))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				w.close()
				return
			case <-t.C:
				if send(&fspb.WatchDirResponse{Event: &fspb.WatchDirResponse_Keepalive{Keepalive: &fspb.WatchDirResponse_KeepAlive{}}}) != nil {
					w.close()
					return
				}
			}
		}
	}()
	conv := s.eventConverter(root, req.Msg.GetIncludeEntry())
	err = w.run(func(e fsEvent) error {
		return send(&fspb.WatchDirResponse{Event: &fspb.WatchDirResponse_Filesystem{Filesystem: conv(e)}})
	})
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err == nil, errors.Is(err, errWatchedDirGone):
		return nil
	default:
		return runError(root, err)
	}
}

// watchRoot resolves and checks the directory a watch is asked for.
func watchRoot(c caller, path string, allowNetwork bool) (string, error) {
	root, err := c.resolve(path)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(root)
	if err != nil {
		return "", fsError("watch", root, err)
	}
	if !fi.IsDir() {
		return "", invalidArg("watch %s: path is not a directory", root)
	}
	if !allowNetwork && onNetworkMount(root) {
		return "", invalidArg("watch %s: the path is on a network filesystem, where changes made elsewhere go unseen; set allowNetworkMounts to watch it anyway", root)
	}
	return root, nil
}

// onNetworkMount tells NFS, SMB and FUSE mounts, on which inotify misses
// changes not made through this kernel.
func onNetworkMount(path string) bool {
	var st unix.Statfs_t
	if unix.Statfs(path, &st) != nil {
		return false
	}
	switch uint32(st.Type) {
	case unix.NFS_SUPER_MAGIC, unix.SMB_SUPER_MAGIC, 0xff534d42 /* CIFS */, 0xfe534d42 /* SMB2 */, unix.FUSE_SUPER_MAGIC:
		return true
	}
	return false
}

// eventConverter makes the wire event: its name relative to the watched
// directory and, when asked, the entry as it is now (none once it is gone).
func (s *Service) eventConverter(root string, includeEntry bool) func(fsEvent) *fspb.FilesystemEvent {
	return func(e fsEvent) *fspb.FilesystemEvent {
		name, err := filepath.Rel(root, e.path)
		if err != nil {
			name = e.path
		}
		ev := &fspb.FilesystemEvent{Name: name, Type: e.op}
		if includeEntry {
			if entry, err := statEntry(e.path, s.cfg.Users.Owners()); err == nil {
				ev.Entry = entry
			}
		}
		return ev
	}
}

func keepaliveInterval(h http.Header) time.Duration {
	if v, err := strconv.Atoi(h.Get("Keepalive-Ping-Interval")); err == nil && v > 0 {
		return time.Duration(min(v, 3600)) * time.Second
	}
	return defaultKeepalive
}

// runError is the Connect error for a watch that broke.
func runError(root string, err error) error {
	var ce *connect.Error
	switch {
	case errors.As(err, &ce):
		return err
	case errors.Is(err, errOverflow), errors.Is(err, errQueueFull):
		return connect.NewError(connect.CodeResourceExhausted, errors.New("watch "+root+": "+err.Error()))
	case errors.Is(err, errWatchedDirGone):
		return connect.NewError(connect.CodeNotFound, errors.New("watch "+root+": "+err.Error()))
	default:
		return connect.NewError(connect.CodeInternal, errors.New("watch "+root+": "+err.Error()))
	}
}
