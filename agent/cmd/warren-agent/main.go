// Command warren-agent is the in-sandbox agent: PID 1 of every sandbox. It
// reaps orphans, dials the daemon's per-sandbox socket and serves the
// process and file services over that connection.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/agent/internal/envdfs"
	"github.com/warrenhq/warren/agent/internal/files"
	"github.com/warrenhq/warren/agent/internal/initproc"
	"github.com/warrenhq/warren/agent/internal/link"
	"github.com/warrenhq/warren/agent/internal/process"
	"github.com/warrenhq/warren/agent/internal/reaper"
	"github.com/warrenhq/warren/agent/internal/tools"
	"github.com/warrenhq/warren/agent/internal/tunnel"
	"github.com/warrenhq/warren/agent/internal/users"
)

// Version is reported by Ping; release builds set it with -ldflags -X.
var Version = "0.1.0-dev"

// maxRequestBytes bounds one message from the daemon (a WriteFile chunk or an
// Exec request with its stdin).
const maxRequestBytes = 64 << 20

// stopGrace is how long children get to exit after a forwarded SIGTERM.
const stopGrace = 3 * time.Second

// exitFlush is how long a stopping agent leaves the connection open after
// its last exit event was handed to the HTTP/2 server.
const exitFlush = 50 * time.Millisecond

func main() {
	socket := flag.String("socket", "/.warren/run/agent.sock", "unix socket of the daemon to dial")
	workspace := flag.String("workspace", "/workspace", "default working directory; relative paths resolve against it")
	verbose := flag.Bool("verbose", false, "log debug messages")
	showVersion := flag.Bool("version", false, "print the version and exit")
	showTools := flag.Bool("tools", false, "print the tool catalogue (names, descriptions, JSON Schemas) as JSON and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println(Version)
		return
	}
	if *showTools {
		if err := json.NewEncoder(os.Stdout).Encode(tools.Describe()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("component", "warren-agent")
	run(*socket, *workspace, log)
}

// run never returns on an error: PID 1 exiting would kill the sandbox, so
// every failure is logged and the agent carries on with what works.
func run(socket, workspace string, log *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	initproc.SetPath()
	if err := initproc.BecomeReaper(); err != nil {
		log.Warn("orphans will not be reaped by the agent", "err", err)
	}
	db := users.System
	if err := initproc.PrepareWorkspace(workspace, db, log); err != nil {
		log.Warn("workspace not ready", "err", err)
	}

	r := reaper.New(log)
	go r.Run(ctx)

	mux := http.NewServeMux()
	opts := []connect.HandlerOption{
		connect.WithReadMaxBytes(maxRequestBytes),
		// The link is a local socket: gzip would only burn CPU on both ends.
		connect.WithCompression("gzip", nil, nil),
	}
	procs := process.New(process.Config{Workspace: workspace, Users: db, Version: Version, Log: log}, r)
	procs.Handle(mux, opts...)
	procs.HandleEnvd(mux, opts...) // E2B's process.Process, over the same processes
	files.New(files.Config{Workspace: workspace, Users: db}).Handle(mux, opts...)
	envdfs.New(envdfs.Config{Users: db, Log: log}).Handle(mux, opts...) // E2B's filesystem.Filesystem, /files, /health
	tunnel.New().Handle(mux, opts...)
	tools.New(tools.Config{Users: db, Reaper: r, Log: log}).Handle(mux, opts...) // the agent tools (bash, read, edit, ...)

	// Registered before the agent answers anything: a SIGTERM that came
	// before the handler would kill the agent without passing it on.
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go stopOnSignal(sigs, cancel, r, procs, log)
	log.Info("agent starting", "version", Version, "pid1", initproc.IsPID1(), "socket", socket)
	link.Serve(ctx, socket, mux, log)
}

// stopOnSignal forwards SIGTERM/SIGINT to the sandbox's processes, gives
// them a moment, lets the streams following them send their exit codes,
// then stops the agent.
func stopOnSignal(ch <-chan os.Signal, stop context.CancelFunc, r *reaper.Reaper, procs *process.Service, log *slog.Logger) {
	sig := <-ch
	log.Info("stopping", "signal", sig.String())
	if initproc.IsPID1() {
		_ = unix.Kill(-1, unix.SIGTERM) // every process in the sandbox but us
	} else {
		for _, pid := range r.Tracked() {
			_ = unix.Kill(-pid, unix.SIGTERM)
		}
	}
	deadline := time.Now().Add(stopGrace)
	for time.Now().Before(deadline) && othersAlive(r) {
		time.Sleep(20 * time.Millisecond)
	}
	// A process reaped is not yet a process reported: its stream still has
	// to drain the pipes and send the exit.
	for time.Now().Before(deadline) && procs.Following() > 0 {
		time.Sleep(5 * time.Millisecond)
	}
	// The HTTP/2 server writes a finished stream's last frames from its own
	// goroutine; give it a moment before the connection goes.
	time.Sleep(exitFlush)
	stop()
	os.Exit(0)
}

func othersAlive(r *reaper.Reaper) bool {
	if initproc.IsPID1() {
		return unix.Kill(-1, 0) == nil
	}
	return len(r.Tracked()) > 0
}
