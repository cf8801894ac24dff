package server

import (
	"encoding/binary"
	"net/http/httptest"
	"testing"
)

// countingRecorder counts the flushes that reach the server's writer.
type countingRecorder struct {
	*httptest.ResponseRecorder
	flushes int
}

func (c *countingRecorder) Flush() { c.flushes++ }

func connectEnvelope(flags byte, msg string) []byte {
	b := make([]byte, 5, 5+len(msg))
	b[0] = flags
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// Each read the proxy passes on is flushed, except one that ends with the
// stream's end-of-stream message, however the envelopes fall across reads.
func TestStreamEndWriterHoldsOnlyTheLastFlush(t *testing.T) {
	start, data, end, eos := connectEnvelope(0, `{"event":{"start":{}}}`), connectEnvelope(0, `{"event":{"data":{}}}`), connectEnvelope(0, `{"event":{"end":{}}}`), connectEnvelope(2, `{}`)
	join := func(parts ...[]byte) (b []byte) {
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	for _, tc := range []struct {
		name        string
		contentType string
		reads       [][]byte
		want        int
	}{
		{"one piece per read", "application/connect+json", [][]byte{start, data, end, eos}, 3},
		{"end with end-of-stream", "application/connect+proto", [][]byte{start, join(end, eos)}, 1},
		{"heads split across reads", "application/connect+json", [][]byte{start[:3], start[3:], join(data, eos[:2]), eos[2:]}, 3},
		{"an empty end-of-stream", "application/connect+json", [][]byte{start, connectEnvelope(2, "")}, 1},
		{"a message after a flag-2 head's bytes", "application/connect+json", [][]byte{join(start, eos[:4])}, 1},
		{"not a Connect stream", "application/json", [][]byte{start, eos}, 2},
	} {
		rec := &countingRecorder{ResponseRecorder: httptest.NewRecorder()}
		rec.Header().Set("Content-Type", tc.contentType)
		w := &streamEndWriter{ResponseWriter: rec}
		for _, r := range tc.reads {
			_, _ = w.Write(r)
			w.Flush()
		}
		if rec.flushes != tc.want {
			t.Errorf("%s: %d flushes, want %d", tc.name, rec.flushes, tc.want)
		}
	}
}
