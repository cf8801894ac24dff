package server

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"golang.org/x/net/websocket"

	"github.com/warrenhq/warren/api/gen/process"
	"github.com/warrenhq/warren/api/gen/process/processconnect"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
)

// The terminal route, GET /sandboxes/{id}/terminal: a WebSocket carrying
// a shell on a PTY that the sandbox's agent runs (its envd process API).
// Binary frames are the terminal's bytes, both ways; text frames are JSON
// control messages: from the client {"resize":{"cols":C,"rows":R}} or
// {"signal":"SIGINT"}, from the server {"exit":N} just before it closes.
//
// A browser cannot set headers on a WebSocket, so the key may come as a
// subprotocol: the client offers client.TerminalProtocol and
// "warren.key.<base64url of the key>"; the server picks the first.
// Any Origin the request carries must be the daemon's own (a page of another
// site cannot drive a terminal with a key it found in a browser).

// terminalKeyPrefix marks the subprotocol that carries an API key.
const terminalKeyPrefix = "warren.key."

// terminalRoutes serve sandboxes' terminals.
type terminalRoutes struct {
	plane Plane
	log   *slog.Logger
}

// keyFromProtocol moves an API key offered as a subprotocol into X-API-Key,
// so the route's key check is the one every route has; it runs before it.
func keyFromProtocol(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-API-Key") == "" {
			for _, p := range offeredProtocols(r) {
				if enc, ok := strings.CutPrefix(p, terminalKeyPrefix); ok {
					if key, err := base64.RawURLEncoding.DecodeString(enc); err == nil {
						r.Header.Set("X-API-Key", string(key))
					}
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

func offeredProtocols(r *http.Request) []string {
	var out []string
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// sameOrigin admits a request without an Origin (not a browser) or whose
// Origin's host is the host it was sent to.
func sameOrigin(r *http.Request) error {
	o := r.Header.Get("Origin")
	if o == "" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || !strings.EqualFold(u.Host, r.Host) {
		return fmt.Errorf("origin %q is not this server's (%s): %w", o, r.Host, errdefs.ErrPermissionDenied)
	}
	return nil
}

// hijackable gives x/net/websocket the Hijacker it asserts, through
// whatever wrappers the response writer has.
type hijackable struct{ http.ResponseWriter }

func (h hijackable) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(h.ResponseWriter).Hijack()
}

func (s *terminalRoutes) terminal(w http.ResponseWriter, r *http.Request) {
	if err := sameOrigin(r); err != nil {
		writeError(w, r, err)
		return
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		writeError(w, r, fmt.Errorf("the terminal is a WebSocket: send Upgrade: websocket: %w", errdefs.ErrInvalid))
		return
	}
	cols, rows, err := termSizeOf(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	team, id := teamOf(r), r.PathValue("id")
	agent, err := s.plane.Agent(r.Context(), team, id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	pc := processconnect.NewProcessClient(&http.Client{Transport: agent.Transport()}, "http://agent")
	srv := websocket.Server{
		Handshake: func(cfg *websocket.Config, _ *http.Request) error {
			cfg.Protocol = []string{client.TerminalProtocol}
			return nil
		},
		Handler: func(ws *websocket.Conn) {
			ws.PayloadType = websocket.BinaryFrame
			s.run(r.Context(), ws, pc, cols, rows)
		},
	}
	srv.ServeHTTP(hijackable{w}, r)
}

// termSizeOf reads the terminal's first size from ?cols= and ?rows=.
func termSizeOf(r *http.Request) (cols, rows uint32, err error) {
	cols, rows = 80, 24
	for name, p := range map[string]*uint32{"cols": &cols, "rows": &rows} {
		v := r.URL.Query().Get(name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n < 1 || n > 1000 {
			return 0, 0, fmt.Errorf("%s=%q: want 1..1000: %w", name, v, errdefs.ErrInvalid)
		}
		*p = uint32(n)
	}
	return cols, rows, nil
}

// terminalControl is a text frame from the client.
type terminalControl struct {
	Resize *struct {
		Cols uint32 `json:"cols"`
		Rows uint32 `json:"rows"`
	} `json:"resize,omitempty"`
	Signal string `json:"signal,omitempty"`
}

// run starts a login shell on a PTY and joins it to ws until either ends.
func (s *terminalRoutes) run(ctx context.Context, ws *websocket.Conn, pc processconnect.ProcessClient, cols, rows uint32) {
	defer ws.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := pc.Start(ctx, connect.NewRequest(&process.StartRequest{
		Process: &process.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", "if command -v bash >/dev/null; then exec bash -l; fi; exec sh -l"}},
		Pty:     &process.PTY{Size: &process.PTY_Size{Cols: cols, Rows: rows}},
	}))
	if err != nil {
		s.sendExit(ws, -1, err)
		return
	}
	defer stream.Close()
	if !stream.Receive() {
		s.sendExit(ws, -1, fmt.Errorf("the shell did not start: %w", stream.Err()))
		return
	}
	pid := stream.Msg().GetEvent().GetStart().GetPid()
	sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
	go func() {
		s.input(ctx, ws, pc, sel)
		cancel() // the client left: end the output stream and the shell
		_, _ = pc.SendSignal(context.WithoutCancel(ctx), connect.NewRequest(&process.SendSignalRequest{Process: sel, Signal: process.Signal_SIGNAL_SIGKILL}))
	}()
	for stream.Receive() {
		ev := stream.Msg().GetEvent()
		if d := ev.GetData(); d != nil {
			if err := client.TerminalCodec.Send(ws, d.GetPty()); err != nil {
				return
			}
		}
		if e := ev.GetEnd(); e != nil {
			s.sendExit(ws, int(e.GetExitCode()), nil)
			return
		}
	}
	if err := stream.Err(); err != nil && ctx.Err() == nil {
		s.sendExit(ws, -1, err)
	}
}

// input forwards the client's keystrokes and control messages to the PTY.
func (s *terminalRoutes) input(ctx context.Context, ws *websocket.Conn, pc processconnect.ProcessClient, sel *process.ProcessSelector) {
	for {
		var f client.TerminalFrame
		if err := client.TerminalCodec.Receive(ws, &f); err != nil {
			return
		}
		var err error
		if !f.Text {
			_, err = pc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel, Input: &process.ProcessInput{Input: &process.ProcessInput_Pty{Pty: f.Data}}}))
		} else {
			err = s.control(ctx, pc, sel, f.Data)
		}
		if err != nil && ctx.Err() == nil {
			s.log.Debug("terminal input", "err", err)
			if errors.Is(err, io.EOF) {
				return
			}
		}
	}
}

func (s *terminalRoutes) control(ctx context.Context, pc processconnect.ProcessClient, sel *process.ProcessSelector, data []byte) error {
	var c terminalControl
	if err := json.Unmarshal(data, &c); err != nil {
		return err
	}
	if c.Resize != nil && c.Resize.Cols > 0 && c.Resize.Rows > 0 {
		_, err := pc.Update(ctx, connect.NewRequest(&process.UpdateRequest{Process: sel, Pty: &process.PTY{Size: &process.PTY_Size{Cols: c.Resize.Cols, Rows: c.Resize.Rows}}}))
		return err
	}
	if c.Signal == "SIGINT" {
		// Ctrl-C as the terminal sends it: the line discipline signals
		// the foreground process group, not just the shell.
		_, err := pc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel, Input: &process.ProcessInput{Input: &process.ProcessInput_Pty{Pty: []byte{3}}}}))
		return err
	}
	return nil
}

// sendExit tells the client the shell ended (and why, when it failed).
func (s *terminalRoutes) sendExit(ws *websocket.Conn, code int, err error) {
	msg := map[string]any{"exit": code}
	if err != nil {
		msg["error"] = err.Error()
	}
	b, _ := json.Marshal(msg)
	_ = websocket.Message.Send(ws, string(b))
}
