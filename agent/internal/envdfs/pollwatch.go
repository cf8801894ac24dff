package envdfs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"

	fspb "github.com/warrenhq/warren/api/gen/filesystem"
)

// The polling form of WatchDir, for clients that cannot hold a stream open:
// CreateWatcher starts a watcher whose events queue up until
// GetWatcherEvents takes them. A watcher nobody polls for Config.WatcherIdle
// is removed, so a client that went away does not leak its inotify instance.

var errQueueFull = fmt.Errorf("more than %d events queued; poll more often", maxQueuedEvents)

type pollWatcher struct {
	w    *watcher
	idle *time.Timer

	mu     sync.Mutex
	events []*fspb.FilesystemEvent
	err    error // why the watcher stopped, reported once the queue is empty
}

// CreateWatcher starts a polling watcher and returns its id.
func (s *Service) CreateWatcher(_ context.Context, req *connect.Request[fspb.CreateWatcherRequest]) (*connect.Response[fspb.CreateWatcherResponse], error) {
	c, err := s.callerOf(req.Header())
	if err != nil {
		return nil, err
	}
	root, err := watchRoot(c, req.Msg.GetPath(), req.Msg.GetAllowNetworkMounts())
	if err != nil {
		return nil, err
	}
	w, err := newWatcher(root, req.Msg.GetRecursive())
	if err != nil {
		return nil, err
	}
	id := newWatcherID()
	pw := &pollWatcher{w: w}
	s.mu.Lock()
	if n := len(s.watchers); n >= maxPollWatchers {
		s.mu.Unlock()
		w.close()
		return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%d watchers exist; remove unused ones first", n))
	}
	s.watchers[id] = pw
	pw.idle = time.AfterFunc(s.cfg.WatcherIdle, func() { s.dropWatcher(id) })
	s.mu.Unlock()

	conv := s.eventConverter(root, req.Msg.GetIncludeEntry())
	go func() {
		err := w.run(func(e fsEvent) error {
			pw.mu.Lock()
			defer pw.mu.Unlock()
			if len(pw.events) >= maxQueuedEvents {
				return errQueueFull
			}
			pw.events = append(pw.events, conv(e))
			return nil
		})
		w.close()
		if err != nil {
			pw.mu.Lock()
			pw.err = runError(root, err)
			pw.mu.Unlock()
		}
	}()
	return connect.NewResponse(&fspb.CreateWatcherResponse{WatcherId: id}), nil
}

// GetWatcherEvents takes the events queued since the last call. Once the
// watcher has stopped (its directory removed, too many events queued) and
// its queue is drained, it answers why.
func (s *Service) GetWatcherEvents(_ context.Context, req *connect.Request[fspb.GetWatcherEventsRequest]) (*connect.Response[fspb.GetWatcherEventsResponse], error) {
	pw, err := s.watcher(req.Msg.GetWatcherId())
	if err != nil {
		return nil, err
	}
	pw.idle.Reset(s.cfg.WatcherIdle)
	pw.mu.Lock()
	defer pw.mu.Unlock()
	events := pw.events
	pw.events = nil
	if len(events) == 0 && pw.err != nil {
		return nil, pw.err
	}
	return connect.NewResponse(&fspb.GetWatcherEventsResponse{Events: events}), nil
}

// RemoveWatcher stops a polling watcher.
func (s *Service) RemoveWatcher(_ context.Context, req *connect.Request[fspb.RemoveWatcherRequest]) (*connect.Response[fspb.RemoveWatcherResponse], error) {
	if _, err := s.watcher(req.Msg.GetWatcherId()); err != nil {
		return nil, err
	}
	s.dropWatcher(req.Msg.GetWatcherId())
	return connect.NewResponse(&fspb.RemoveWatcherResponse{}), nil
}

func (s *Service) watcher(id string) (*pollWatcher, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pw, ok := s.watchers[id]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher %q not found (removed, or expired after %s unpolled)", id, s.cfg.WatcherIdle))
	}
	return pw, nil
}

func (s *Service) dropWatcher(id string) {
	s.mu.Lock()
	pw, ok := s.watchers[id]
	delete(s.watchers, id)
	s.mu.Unlock()
	if ok {
		pw.idle.Stop()
		pw.w.close()
	}
}

func newWatcherID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // never fails (crypto/rand documents it)
	return "w" + hex.EncodeToString(b)
}
