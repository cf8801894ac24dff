//go:build kube

package bench

import (
	"encoding/binary"
	"testing"
)

func frame(flag byte, msg string) []byte {
	b := make([]byte, 5, 5+len(msg))
	b[0] = flag
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

func TestStreamEndsClean(t *testing.T) {
	join := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	start, end := frame(0, `{"event":{"start":{"pid":7}}}`), frame(0, `{"event":{"end":{"exited":true}}}`)
	for _, c := range []struct {
		name string
		body []byte
		ok   bool
	}{
		{"clean", join(start, end, frame(2, `{}`)), true},
		{"error at the end", join(start, end, frame(2, `{"error":{"code":"internal"}}`)), false},
		{"no end event", join(start, frame(2, `{}`)), false},
		{"no end of stream", join(start, end), false},
		{"cut frame", join(start, end, frame(2, `{}`)[:6]), false},
	} {
		if err := streamEndsClean(c.body); (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok %v", c.name, err, c.ok)
		}
	}
}
