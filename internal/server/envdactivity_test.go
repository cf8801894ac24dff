package server

import (
	"bytes"
	"encoding/binary"
	"io"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	fspb "github.com/warrenhq/warren/api/gen/filesystem"
	"github.com/warrenhq/warren/api/gen/process"
)

type countingNoter struct{ n int }

func (c *countingNoter) Note() { c.n++ }

// chunked hands out its bytes size at a time, as a network read would.
type chunked struct {
	b    []byte
	size int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.size)], c.b)
	c.b = c.b[n:]
	return n, nil
}

func envelope(flags byte, msg []byte) []byte {
	b := make([]byte, 5, 5+len(msg))
	b[0] = flags
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// A metered stream notes what each route should count: every byte of a
// file transfer, and every message of a watch or an input stream but its
// keepalives; process output streams are counted where output is
// collected, not here.
func TestEnvdMeteringOf(t *testing.T) {
	for path, want := range map[string][2]bool{
		"/files":                               {true, true},
		"/filesystem.Filesystem/WatchDir":      {false, true},
		"/process.Process/StreamInput":         {true, false},
		"/process.Process/Start":               {false, false},
		"/process.Process/Connect":             {false, false},
		"/filesystem.Filesystem/Stat":          {false, false},
		"/filesystem.Filesystem/CreateWatcher": {false, false},
	} {
		how := envdMeteringOf(path)
		if got := [2]bool{how.up != nil, how.down != nil}; got != want {
			t.Errorf("%s: metered (up, down) = %v, want %v", path, got, want)
		}
	}

	// A file transfer: every read that moved bytes.
	var c countingNoter
	body := everyByte(io.NopCloser(&chunked{b: make([]byte, 10), size: 3}), &c)
	if n, err := io.Copy(io.Discard, body); n != 10 || err != nil {
		t.Fatalf("copy: %d, %v", n, err)
	}
	if c.n != 4 {
		t.Fatalf("4 reads of a file moved bytes; noted %d", c.n)
	}
}

// messageMeter notes each message of a Connect stream but keepalives, in
// the binary and the JSON codec, however the envelopes are cut into reads.
func TestMessageMeterSkipsKeepalives(t *testing.T) {
	pb := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	js := func(m proto.Message) []byte {
		b, err := protojson.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	keep := &fspb.WatchDirResponse{Event: &fspb.WatchDirResponse_Keepalive{Keepalive: &fspb.WatchDirResponse_KeepAlive{}}}
	start := &fspb.WatchDirResponse{Event: &fspb.WatchDirResponse_Start{Start: &fspb.WatchDirResponse_StartEvent{}}}
	small := &fspb.WatchDirResponse{Event: &fspb.WatchDirResponse_Filesystem{Filesystem: &fspb.FilesystemEvent{Name: "a", Type: fspb.EventType_EVENT_TYPE_CREATE}}}
	large := &fspb.WatchDirResponse{Event: &fspb.WatchDirResponse_Filesystem{Filesystem: &fspb.FilesystemEvent{Name: strings.Repeat("x", 300), Type: fspb.EventType_EVENT_TYPE_WRITE}}}

	var stream []byte
	want := 0
	add := func(flags byte, msg []byte, counts bool) {
		stream = append(stream, envelope(flags, msg)...)
		if counts {
			want++
		}
	}
	// Binary.
	add(0, pb(start), true)
	add(0, pb(keep), false)
	add(0, pb(small), true)
	add(0, pb(keep), false)
	add(0, pb(large), true)
	add(0, nil, true) // an empty message is not a keepalive
	// JSON, whitespace as protojson may vary it.
	add(0, js(keep), false)
	add(0, []byte(`{"keepalive": {}}`), false)
	add(0, []byte(" {\n \"keepalive\" : { }\n}"), false)
	add(0, []byte(`{"keepalive":{},"x":1}`), true)
	add(0, []byte(`{"keepalive":{`), true) // cut short: not one
	add(0, js(small), true)
	add(0, js(large), true)
	add(0, pb(keep), false)
	add(2, []byte(`{}`), true) // the end of the stream is a message

	for size := 1; size <= len(stream); size++ {
		var c countingNoter
		body := watchDirMessages(io.NopCloser(&chunked{b: bytes.Clone(stream), size: size}), &c)
		if n, err := io.Copy(io.Discard, body); n != int64(len(stream)) || err != nil {
			t.Fatalf("reads of %d: copied %d of %d, %v", size, n, len(stream), err)
		}
		if c.n != want {
			t.Fatalf("reads of %d bytes: noted %d messages, want %d", size, c.n, want)
		}
	}

	// StreamInput's keepalive is its own message.
	in := pb(&process.StreamInputRequest{Event: &process.StreamInputRequest_Keepalive{Keepalive: &process.StreamInputRequest_KeepAlive{}}})
	data := pb(&process.StreamInputRequest{Event: &process.StreamInputRequest_Data{Data: &process.StreamInputRequest_DataEvent{
		Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("ls\n")}}}}})
	var c countingNoter
	body := inputMessages(io.NopCloser(bytes.NewReader(slices.Concat(envelope(0, in), envelope(0, data), envelope(0, in)))), &c)
	if _, err := io.Copy(io.Discard, body); err != nil || c.n != 1 {
		t.Fatalf("stdin stream of keepalive, data, keepalive: noted %d, %v; want 1", c.n, err)
	}
}
