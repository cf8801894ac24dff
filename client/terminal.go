package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"golang.org/x/net/websocket"
)

// TerminalProtocol is the WebSocket subprotocol of GET /sandboxes/{id}/terminal.
const TerminalProtocol = "warren.terminal.v1"

// Terminal is a shell on a PTY in a sandbox (GET /sandboxes/{id}/terminal):
// Write sends keystrokes, Next returns output until the shell exits.
type Terminal struct {
	ws *websocket.Conn
}

// TerminalExit is how a terminal's shell ended.
type TerminalExit struct {
	Code  int    `json:"exit"`
	Error string `json:"error,omitempty"`
}

// Terminal opens a shell on a cols×rows terminal in sandbox id.
func (s *SandboxesService) Terminal(ctx context.Context, id string, cols, rows int) (*Terminal, error) {
	conn, err := s.t.dial(ctx)
	if err != nil {
		return nil, err
	}
	scheme := map[string]string{"http": "ws", "https": "wss"}[s.t.base.Scheme]
	loc := &url.URL{Scheme: scheme, Host: s.t.base.Host, Path: s.t.base.Path + "/sandboxes/" + url.PathEscape(id) + "/terminal",
		RawQuery: url.Values{"cols": {strconv.Itoa(cols)}, "rows": {strconv.Itoa(rows)}}.Encode()}
	origin := &url.URL{Scheme: s.t.base.Scheme, Host: s.t.base.Host}
	cfg := &websocket.Config{Location: loc, Origin: origin, Version: websocket.ProtocolVersionHybi13,
		Protocol: []string{TerminalProtocol}, Header: http.Header{}}
	if s.t.apiKey != "" {
		cfg.Header.Set("X-API-Key", s.t.apiKey)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	ws, err := websocket.NewClient(cfg, conn)
	stop()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("open the terminal of %s: %w (is the key right and the sandbox running?)", id, err)
	}
	ws.PayloadType = websocket.BinaryFrame
	return &Terminal{ws: ws}, nil
}

// Write sends input (keystrokes; 0x03 is Ctrl-C) to the terminal.
func (t *Terminal) Write(p []byte) (int, error) {
	if err := websocket.Message.Send(t.ws, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Resize tells the terminal its new size.
func (t *Terminal) Resize(cols, rows int) error {
	b, _ := json.Marshal(map[string]any{"resize": map[string]int{"cols": cols, "rows": rows}})
	return websocket.Message.Send(t.ws, string(b))
}

// Next returns the terminal's next output, or (nil, exit, nil) once the
// shell ended.
func (t *Terminal) Next() ([]byte, *TerminalExit, error) {
	var f TerminalFrame
	if err := TerminalCodec.Receive(t.ws, &f); err != nil {
		return nil, nil, err
	}
	if !f.Text {
		return f.Data, nil, nil
	}
	var e TerminalExit
	if err := json.Unmarshal(f.Data, &e); err != nil {
		return nil, nil, fmt.Errorf("terminal: bad control message %q: %w", f.Data, err)
	}
	return nil, &e, nil
}

// Close ends the terminal (the shell is killed).
func (t *Terminal) Close() error { return t.ws.Close() }

// TerminalFrame is one message of a terminal's WebSocket: binary frames
// are the terminal's bytes, text frames JSON control messages.
type TerminalFrame struct {
	Data []byte
	Text bool
}

// TerminalCodec sends []byte as binary frames and receives into a
// *TerminalFrame, keeping the frame's type.
var TerminalCodec = websocket.Codec{
	Marshal: func(v any) ([]byte, byte, error) {
		b, ok := v.([]byte)
		if !ok {
			return nil, 0, fmt.Errorf("terminal: send []byte, not %T", v)
		}
		return b, websocket.BinaryFrame, nil
	},
	Unmarshal: func(data []byte, payloadType byte, v any) error {
		f, ok := v.(*TerminalFrame)
		if !ok {
			return fmt.Errorf("terminal: receive into *TerminalFrame, not %T", v)
		}
		f.Data, f.Text = data, payloadType == websocket.TextFrame
		return nil
	},
}
