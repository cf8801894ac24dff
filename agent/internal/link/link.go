// Package link keeps the agent's one connection to the daemon.
//
// The daemon listens on a per-sandbox unix socket whose directory is
// bind-mounted into the sandbox; the agent dials it and then plays the HTTP/2
// server on the dialed connection, so the daemon's calls are multiplexed
// streams over it. When the daemon restarts the connection drops and the
// agent dials again, forever; running commands keep running meanwhile.
package link

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/http2"
)

//lint:file-ignore SA1019 x/net/http2's Server is deprecated for net/http's, but the agent serves HTTP/2 on the one connection it dialed to the daemon, which net/http serves only through a one-connection listener shim; the move is a change of its own, made with the daemon's side (internal/agentconn), not a lint fix

const (
	minBackoff = 20 * time.Millisecond
	maxBackoff = 200 * time.Millisecond
)

// Serve dials socketPath and serves h on each connection until ctx ends.
// It never returns an error: a daemon that is away now will be back.
func Serve(ctx context.Context, socketPath string, h http.Handler, log *slog.Logger) {
	srv := &http2.Server{
		MaxConcurrentStreams: 1000,
		// A daemon that stopped answering without closing the socket is
		// noticed by pings, and the agent re-dials.
		ReadIdleTimeout: 30 * time.Second,
		PingTimeout:     10 * time.Second,
	}
	backoff := minBackoff
	var d net.Dialer
	loggedDown := false
	for ctx.Err() == nil {
		conn, err := d.DialContext(ctx, "unix", socketPath)
		if err != nil {
			if !loggedDown {
				log.Info("daemon not reachable; retrying", "socket", socketPath, "err", err)
				loggedDown = true
			}
			sleep(ctx, backoff)
			backoff = min(backoff*2, maxBackoff)
			continue
		}
		log.Info("connected to daemon", "socket", socketPath)
		loggedDown = false
		backoff = minBackoff
		serveOne(ctx, srv, conn, h)
		log.Info("daemon connection closed; re-dialing", "socket", socketPath)
	}
}

// serveOne serves one connection until it drops or ctx ends.
func serveOne(ctx context.Context, srv *http2.Server, conn net.Conn, h http.Handler) {
	connCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(connCtx, func() { conn.Close() })
	defer stop()
	srv.ServeConn(conn, &http2.ServeConnOpts{Context: connCtx, Handler: h})
	conn.Close()
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
