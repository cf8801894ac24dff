package server

import (
	"bytes"
	"encoding/binary"
	"io"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	fspb "github.com/warrenhq/warren/api/gen/filesystem"
	"github.com/warrenhq/warren/api/gen/process"
	"github.com/warrenhq/warren/internal/session"
)

// Bytes moving on a long envd stream count as activity against the idle
// timeout, as they do on a port connection (ports.go's meteredConn): the
// request that opened the stream touched the sandbox once; what flows after
// keeps touching it, through a session.ActivityMeter. What counts depends
// on the route:
//
//   - /files (an upload or download): every byte, either way.
//   - filesystem.Filesystem/WatchDir: every message the agent sends but its
//     keepalives, so that a watch on a quiet directory lets the sandbox idle.
//   - process.Process/StreamInput: every message the client sends but its
//     keepalives.
//   - process.Process/Start and Connect: nothing. What they carry is the
//     process's output, which already counts where the daemon collects it
//     (procs' OnOutput), and their keepalives must not count.
//
// The other RPCs are unary: the request that touched the sandbox is all.

// noter is what a metered stream tells of its traffic; a
// *session.ActivityMeter is one.
type noter interface{ Note() }

var _ noter = (*session.ActivityMeter)(nil)

// metering wraps one direction of an envd stream so that what it carries
// is noted as activity.
type metering func(body io.ReadCloser, meter noter) io.ReadCloser

// envdMetering is how a route's request body (up) and response (down)
// count; nil counts nothing.
type envdMetering struct{ up, down metering }

var (
	watchDirMessages = messagesBut(&fspb.WatchDirResponse{Event: &fspb.WatchDirResponse_Keepalive{Keepalive: &fspb.WatchDirResponse_KeepAlive{}}})
	inputMessages    = messagesBut(&process.StreamInputRequest{Event: &process.StreamInputRequest_Keepalive{Keepalive: &process.StreamInputRequest_KeepAlive{}}})
)

// envdMeteringOf is how the envd route at path counts as activity.
func envdMeteringOf(path string) envdMetering {
	switch path {
	case "/files":
		return envdMetering{up: everyByte, down: everyByte}
	case "/filesystem.Filesystem/WatchDir":
		return envdMetering{down: watchDirMessages}
	case "/process.Process/StreamInput":
		return envdMetering{up: inputMessages}
	}
	return envdMetering{}
}

// everyByte notes every read that moved bytes.
func everyByte(body io.ReadCloser, meter noter) io.ReadCloser {
	return &meteredBody{ReadCloser: body, meter: meter}
}

type meteredBody struct {
	io.ReadCloser
	meter noter
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.meter.Note()
	}
	return n, err
}

// maxKeepalive bounds the messages that may be a keepalive: the JSON
// encoding with generous whitespace. A longer message counts at its header.
const maxKeepalive = 64

// keepalive is one stream's keepalive message in the two codecs the SDKs
// use: binary protobuf, and JSON with its whitespace removed (protojson
// varies the whitespace on purpose).
type keepalive struct{ binary, json []byte }

// messagesBut notes every message of a Connect (or gRPC) stream except
// keepalives like ka.
func messagesBut(ka proto.Message) metering {
	b, err := proto.Marshal(ka)
	if err != nil {
		panic(err) // a generated message with an empty field: an invariant
	}
	j, err := protojson.Marshal(ka)
	if err != nil {
		panic(err)
	}
	k := keepalive{binary: b, json: withoutSpace(j)}
	return func(body io.ReadCloser, meter noter) io.ReadCloser {
		return &messageMeter{ReadCloser: body, meter: meter, ka: k}
	}
}

// messageMeter follows the envelopes of a stream (a flags byte and a
// 4-byte big-endian length, then the message) through the reads that carry
// them and notes each message that is not a keepalive. It skips over
// message bodies: only a message short enough to be a keepalive is kept,
// to be judged when its last byte arrives.
type messageMeter struct {
	io.ReadCloser
	meter  noter
	ka     keepalive
	hdr    [5]byte
	nhdr   int    // bytes of the current envelope's header seen
	left   uint32 // bytes of the current message still to come
	small  [maxKeepalive]byte
	nsmall int
	judge  bool // the current message may be a keepalive: kept in small
}

func (m *messageMeter) Read(p []byte) (int, error) {
	n, err := m.ReadCloser.Read(p)
	m.scan(p[:n])
	return n, err
}

func (m *messageMeter) scan(p []byte) {
	for len(p) > 0 {
		if m.nhdr < len(m.hdr) {
			c := copy(m.hdr[m.nhdr:], p)
			m.nhdr += c
			p = p[c:]
			if m.nhdr < len(m.hdr) {
				return
			}
			m.left = binary.BigEndian.Uint32(m.hdr[1:])
			m.nsmall = 0
			m.judge = m.left <= maxKeepalive
			if !m.judge {
				m.meter.Note()
			}
			if m.left == 0 {
				m.end()
			}
			continue
		}
		c := min(uint32(len(p)), m.left)
		if m.judge {
			m.nsmall += copy(m.small[m.nsmall:], p[:c])
		}
		m.left -= c
		p = p[c:]
		if m.left == 0 {
			m.end()
		}
	}
}

// end closes the current message: a short one is noted unless it is a
// keepalive.
func (m *messageMeter) end() {
	if m.judge && !m.ka.is(m.small[:m.nsmall]) {
		m.meter.Note()
	}
	m.nhdr = 0
}

func (k keepalive) is(msg []byte) bool {
	if bytes.Equal(msg, k.binary) {
		return true
	}
	// JSON, compared without its whitespace (a keepalive holds no strings).
	i := 0
	for _, c := range msg {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		if i == len(k.json) || k.json[i] != c {
			return false
		}
		i++
	}
	return i == len(k.json)
}

func withoutSpace(b []byte) []byte {
	return bytes.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\n', '\r':
			return -1
		}
		return r
	}, b)
}
