// Package agentconn is the daemon's end of one sandbox's agent connection.
//
// The daemon listens on a unix socket in a directory private to the sandbox
// (bind-mounted into it); the agent inside dials it and serves HTTP/2 on the
// connection, and the daemon is the HTTP/2 client. The agent re-dials after a
// daemon restart, so a fresh Listen on the same path picks the sandbox back up.
//
// Everything the agent says is untrusted: messages are size-bounded, the
// handshake has deadlines, and a newer connection simply replaces an older one
// (code in the sandbox can always impersonate the agent, but only to itself).
package agentconn

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/net/http2"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/api/gen/warren/agent/v1/agentv1connect"
	"github.com/warrenhq/warren/internal/errdefs"
)

//lint:file-ignore SA1019 x/net/http2's Transport and ClientConn are deprecated for net/http's, but the daemon is the HTTP/2 client on a connection the agent dialed in, which net/http's ClientConn (it dials its own) takes only through a dialer shim, and the link's liveness reads ClientConn.State; the move is a change of its own, not a lint fix

const (
	// MaxMessageBytes bounds one message read from the agent. Output chunks
	// are ≤ 64 KiB and file chunks ≤ 1 MiB, so this leaves room and no more.
	MaxMessageBytes = 4 << 20
	// handshakeTimeout bounds writing the HTTP/2 preface to a new connection.
	handshakeTimeout = 5 * time.Second
	// pingTimeout bounds one readiness Ping.
	pingTimeout = 2 * time.Second
	// maxSocketPath is sun_path's size less the terminating NUL.
	maxSocketPath = 107
	baseURL       = "http://agent"
)

// Conn listens on one sandbox's socket and holds the current agent connection.
type Conn struct {
	path string
	file fs.FileInfo // the socket file we made, so Close removes only it
	ln   *net.UnixListener
	log  *slog.Logger
	tr   *http2.Transport

	mu      sync.Mutex
	cur     *http2.ClientConn
	changed chan struct{} // closed and replaced whenever cur changes
	closed  bool

	acceptDone chan struct{}
	nsRoot     atomic.Int64 // see AllowRoot; 0: none
	process    agentv1connect.ProcessServiceClient
	files      agentv1connect.FilesServiceClient
	tools      agentv1connect.ToolsServiceClient
}

// Listen removes a stale socket file at socketPath, listens there and
// accepts agent connections in the background until Close.
//
// The socket is the daemon's trust in the sandbox: whoever connects is
// sent every command, file and environment variable the API is given for
// the sandbox. So only root may connect (mode 0600, owner root, and the
// peer's uid checked on accept): the agent runs as root, while the
// commands it runs for clients mostly run as an unprivileged user, who
// must not be able to take the link over.
func Listen(ctx context.Context, socketPath string, log *slog.Logger) (*Conn, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(socketPath) > maxSocketPath {
		return nil, fmt.Errorf("agent socket path %s is longer than %d bytes: use a shorter data directory: %w", socketPath, maxSocketPath, errdefs.ErrInvalid)
	}
	if err := removeStaleSocket(socketPath); err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "unix", socketPath)
	if err != nil {
		return nil, fmt.Errorf("listen on agent socket %s: %w", socketPath, err)
	}
	ln := l.(*net.UnixListener)
	// Close must not unlink the path behind a successor's back; we do it.
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(socketPath, 0o600); err != nil {
		ln.Close()
		_ = os.Remove(socketPath)
		return nil, fmt.Errorf("chmod agent socket %s: %w", socketPath, err)
	}
	fi, err := os.Lstat(socketPath)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("stat agent socket %s: %w", socketPath, err)
	}
	c := &Conn{
		path:       socketPath,
		file:       fi,
		ln:         ln,
		log:        log.With("socket", socketPath),
		changed:    make(chan struct{}),
		acceptDone: make(chan struct{}),
		tr: &http2.Transport{
			AllowHTTP: true,
			// One connection, no pool to spill into: past the agent's
			// stream limit a call waits for a slot instead of failing.
			StrictMaxConcurrentStreams: true,
			// The agent's headers are bounded like its messages.
			MaxHeaderListSize: 64 << 10,
			// An agent that stops answering without closing the socket
			// (frozen, or hostile) is detected and the conn dropped.
			ReadIdleTimeout: 15 * time.Second,
			PingTimeout:     5 * time.Second,
		},
	}
	hc := &http.Client{Transport: roundTripper{c}}
	opts := []connect.ClientOption{
		connect.WithReadMaxBytes(MaxMessageBytes),
		// Local socket: compressing costs CPU and gains nothing, and an
		// untrusted peer should not get to make us inflate data.
		connect.WithAcceptCompression("gzip", nil, nil),
	}
	c.process = agentv1connect.NewProcessServiceClient(hc, baseURL, opts...)
	c.files = agentv1connect.NewFilesServiceClient(hc, baseURL, opts...)
	c.tools = agentv1connect.NewToolsServiceClient(hc, baseURL, opts...)
	go c.acceptLoop()
	return c, nil
}

// removeStaleSocket removes a socket left by a previous daemon, and refuses to
// remove anything that is not a socket.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspect agent socket path %s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("agent socket path %s exists and is not a socket; move it away: %w", path, errdefs.ErrConflict)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove stale agent socket %s: %w", path, err)
	}
	return nil
}

func (c *Conn) acceptLoop() {
	defer close(c.acceptDone)
	for {
		nc, err := c.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			c.log.Warn("accept agent connection", "err", err)
			time.Sleep(50 * time.Millisecond) // e.g. EMFILE: do not spin
			continue
		}
		if uid, ok := peerUID(nc); !ok || !c.rootUID(uid) {
			c.log.Warn("refused an agent connection from a non-root peer", "uid", uid, "known", ok)
			nc.Close()
			continue
		}
		c.adopt(nc)
	}
}

// rootUID says whether uid is root's: the host's, or that of the
// sandbox's root in its user namespace (AllowRoot).
func (c *Conn) rootUID(uid int) bool {
	if uid == 0 {
		return true
	}
	r := c.nsRoot.Load()
	return r > 0 && int64(uid) == r
}

// AllowRoot accepts agent connections from uid too: the host uid of the
// sandbox's root when it runs in a user namespace. That uid is the
// sandbox's alone (its range is no one else's), and its unprivileged users
// have other uids, so the link stays root's.
func (c *Conn) AllowRoot(uid uint32) { c.nsRoot.Store(int64(uid)) }

// peerUID returns the uid of the process at the other end of a unix
// connection (SO_PEERCRED: its credentials when it connected).
func peerUID(nc net.Conn) (int, bool) {
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		return -1, false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return -1, false
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || serr != nil {
		return -1, false
	}
	return int(cred.Uid), true
}

// adopt makes nc the current connection and closes the previous one.
func (c *Conn) adopt(nc net.Conn) {
	// NewClientConn writes the preface and settings; a peer that does not
	// read cannot hold us past the deadline.
	_ = nc.SetWriteDeadline(time.Now().Add(handshakeTimeout))
	cc, err := c.tr.NewClientConn(nc)
	if err != nil {
		c.log.Warn("agent handshake failed", "err", err)
		nc.Close()
		return
	}
	_ = nc.SetWriteDeadline(time.Time{})
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cc.Close()
		return
	}
	old := c.cur
	c.cur = cc
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	if old != nil {
		old.Close()
	}
	c.log.Debug("agent connected")
}

// current returns the connection calls should use, or nil.
func (c *Conn) current() (*http2.ClientConn, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// A dropped connection counts as none. (Not CanTakeNewRequest: that is
	// also false while all stream slots are busy, which is not "down".)
	if c.cur != nil {
		if st := c.cur.State(); st.Closed || st.Closing {
			return nil, c.changed
		}
	}
	return c.cur, c.changed
}

// Connected reports whether an agent connection is up and usable.
func (c *Conn) Connected() bool {
	cc, _ := c.current()
	return cc != nil
}

// Process is the agent's process service over whichever connection is current.
func (c *Conn) Process() agentv1connect.ProcessServiceClient { return c.process }

// Files is the agent's file service over whichever connection is current.
func (c *Conn) Files() agentv1connect.FilesServiceClient { return c.files }

// Tools is the agent's tool service (bash, read, edit, …).
func (c *Conn) Tools() agentv1connect.ToolsServiceClient { return c.tools }

// Transport sends HTTP requests to the agent's own server (E2B's envd API
// that the agent serves) over whichever connection is current. Requests
// need an absolute URL; its host is ignored.
func (c *Conn) Transport() http.RoundTripper { return roundTripper{c} }

// Drop closes the current agent connection and keeps listening: the agent
// dials again, and WaitReady waits for that new connection. Used when the
// sandbox's kernel is about to be saved and restored, which breaks the
// connection anyway, so that a stale one is never mistaken for a live one.
func (c *Conn) Drop() {
	c.mu.Lock()
	cur := c.cur
	c.cur = nil
	c.mu.Unlock()
	if cur != nil {
		cur.Close()
	}
}

// Close stops listening, closes the agent connection and removes the socket
// file. The agent's processes keep running; the agent re-dials whoever
// listens on the path next.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	cur := c.cur
	c.cur = nil
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()

	err := c.ln.Close()
	<-c.acceptDone
	if cur != nil {
		cur.Close()
	}
	// A successor may already listen on the path: leave its socket alone.
	if fi, serr := os.Lstat(c.path); serr == nil && os.SameFile(fi, c.file) {
		if rerr := os.Remove(c.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
			err = rerr
		}
	}
	if err != nil {
		return fmt.Errorf("close agent socket %s: %w", c.path, err)
	}
	return nil
}

// roundTripper sends each request over the connection current at the time.
type roundTripper struct{ c *Conn }

func (rt roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	cc, _ := rt.c.current()
	if cc == nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("no agent connected on %s: the sandbox is starting, stopped, or its agent died", rt.c.path))
	}
	return cc.RoundTrip(req)
}
