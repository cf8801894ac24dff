package process

import (
	"sync"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
)

// feedDepth is how many chunks a feed buffers before the process's output
// readers wait for its stream.
const feedDepth = 16

// feed is one E2B stream following a process's output live. Unlike the
// rings, which keep the newest output for whoever asks later, a feed loses
// nothing: while it is attached the process's readers wait for it, as envd
// makes a command wait for a slow client, so `commands.run` returns all of
// a command's output however much there is.
type feed struct {
	ch   chan feedChunk
	done chan struct{} // closed when the stream goes away
	once sync.Once
}

type feedChunk struct {
	stream agentv1.Stream
	data   []byte
}

// subscribe attaches a feed to p: it gets the output p's readers pick up
// from now on. Attach it before the process's readers start to get all of it.
func (g *registry) subscribe(p *proc) *feed {
	f := &feed{ch: make(chan feedChunk, feedDepth), done: make(chan struct{})}
	g.mu.Lock()
	defer g.mu.Unlock()
	if p.feeds == nil {
		p.feeds = map[*feed]struct{}{}
	}
	p.feeds[f] = struct{}{}
	return f
}

// unsubscribe detaches f; readers blocked on it carry on at once.
func (g *registry) unsubscribe(p *proc, f *feed) {
	f.once.Do(func() { close(f.done) })
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(p.feeds, f)
}

// publish hands a chunk of p's output to every attached feed, waiting for
// each to take it or go away.
func (g *registry) publish(p *proc, stream agentv1.Stream, data []byte) {
	g.mu.Lock()
	if len(p.feeds) == 0 {
		g.mu.Unlock()
		return
	}
	feeds := make([]*feed, 0, len(p.feeds))
	for f := range p.feeds {
		feeds = append(feeds, f)
	}
	g.mu.Unlock()
	c := feedChunk{stream: stream, data: append([]byte(nil), data...)} // read buffers are reused
	for _, f := range feeds {
		select {
		case f.ch <- c:
		case <-f.done:
		}
	}
}
