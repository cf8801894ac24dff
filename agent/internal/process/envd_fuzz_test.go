package process

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/agent/internal/agenttest"
)

// FuzzEnvdEnvelope sends arbitrary bodies to the E2B process service's
// server-streaming Connect as enveloped requests (JSON or binary, plain or
// gzip-compressed), as any caller holding the sandbox's token can: the
// envelope reading, decompression and decoding must answer with a Connect
// error, never panic or fail the server. Connect only reads (no process is
// started, and an unknown pid or tag is not found), so no input does
// anything.
func FuzzEnvdEnvelope(f *testing.F) {
	svc := New(Config{Workspace: f.TempDir(), Users: agenttest.Users(f), Version: "test"}, testReaper)
	mux := http.NewServeMux()
	opts := []connect.HandlerOption{connect.WithReadMaxBytes(1 << 20), connect.WithCompression("gzip", nil, nil)}
	svc.HandleEnvd(mux, opts...)

	f.Add(byte(0), envelope(0, `{"process":{"pid":999999}}`))
	f.Add(byte(0), envelope(0, `{"process":{"tag":"nope"}}`))
	f.Add(byte(1), []byte{0, 0, 0, 0, 4, 0x0a, 0x02, 0x08, 0x01})
	f.Add(byte(1), []byte{0, 0xff, 0xff, 0xff, 0xff, 1, 2, 3})
	f.Add(byte(2), []byte{1, 0, 0, 0, 3, 1, 2, 3})
	f.Add(byte(3), envelope(2, `{}`))
	f.Add(byte(0), envelope(0, `{"process":{"pid":1}}`)[:7])
	f.Fuzz(func(t *testing.T, mode byte, body []byte) {
		contentType := "application/connect+json"
		if mode&1 == 1 {
			contentType = "application/connect+proto"
		}
		if mode&2 == 2 && len(body) >= 5 && body[0]&1 == 1 {
			// A message flagged compressed is gzipped for real half the
			// time, so decompression of valid and invalid streams is tried.
			if mode&4 == 4 {
				var z bytes.Buffer
				w := gzip.NewWriter(&z)
				w.Write(body[5:])
				w.Close()
				body = append(body[:1:1], append([]byte{byte(z.Len() >> 24), byte(z.Len() >> 16), byte(z.Len() >> 8), byte(z.Len())}, z.Bytes()...)...)
			}
		}
		req := httptest.NewRequest(http.MethodPost, "/process.Process/Connect", bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Connect-Protocol-Version", "1")
		if mode&2 == 2 {
			req.Header.Set("Connect-Content-Encoding", "gzip")
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("status %d for %q", rec.Code, body)
		}
		if rec.Code == http.StatusOK && !bytes.Contains(rec.Body.Bytes(), []byte("error")) && len(rec.Body.Bytes()) > 0 {
			// A stream that did not fail must have found a process,
			// and there are none.
			t.Fatalf("no error for %q: %q", body, rec.Body.Bytes())
		}
	})
}
