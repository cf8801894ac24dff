package process

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"testing"

	"github.com/warrenhq/warren/agent/internal/agenttest"
)

// frame is one Connect streaming envelope.
type frame struct {
	flags byte
	body  map[string]any
}

func envelope(flags byte, msg string) []byte {
	b := make([]byte, 5+len(msg))
	b[0] = flags
	binary.BigEndian.PutUint32(b[1:5], uint32(len(msg)))
	copy(b[5:], msg)
	return b
}

// postFrames posts one enveloped JSON message over HTTP/1.1, the way the
// E2B SDK's fetch transport does, and reads every frame of the answer.
func postFrames(t *testing.T, url, procedure, msg string) []frame {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+procedure, bytes.NewReader(envelope(0, msg)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set("Keepalive-Ping-Interval", "50")
	req.Header.Set("Connect-Timeout-Ms", "60000")
	res, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/connect+json" || res.ProtoMajor != 1 {
		t.Fatalf("answer %s %s %q", res.Proto, res.Status, res.Header.Get("Content-Type"))
	}
	var frames []frame
	r := bufio.NewReader(res.Body)
	for {
		var head [5]byte
		if _, err := io.ReadFull(r, head[:]); err == io.EOF {
			return frames
		} else if err != nil {
			t.Fatalf("frame header: %v", err)
		}
		body := make([]byte, binary.BigEndian.Uint32(head[1:]))
		if _, err := io.ReadFull(r, body); err != nil {
			t.Fatalf("frame body: %v", err)
		}
		f := frame{flags: head[0]}
		if err := json.Unmarshal(body, &f.body); err != nil {
			t.Fatalf("frame %q: %v", body, err)
		}
		frames = append(frames, f)
	}
}

func TestEnvdRawConnectJSON(t *testing.T) {
	e := newEnvdEnv(t, agenttest.Users(t))
	frames := postFrames(t, e.url, "/process.Process/Start",
		`{"process":{"cmd":"/bin/bash","args":["-l","-c","echo hi; exit 2"],"envs":{}},"stdin":false}`)
	if len(frames) != 4 {
		t.Fatalf("got %d frames: %v", len(frames), frames)
	}
	start, _ := frames[0].body["event"].(map[string]any)["start"].(map[string]any)
	if frames[0].flags != 0 || start == nil || start["pid"].(float64) <= 0 {
		t.Fatalf("first frame %v", frames[0])
	}
	want := []frame{
		{0, map[string]any{"event": map[string]any{"data": map[string]any{"stdout": "aGkK"}}}},
		{0, map[string]any{"event": map[string]any{"end": map[string]any{"exitCode": 2.0, "exited": true, "status": "exit status 2", "error": "exit status 2"}}}},
		{2, map[string]any{}},
	}
	if !reflect.DeepEqual(frames[1:], want) {
		t.Fatalf("frames %v, want %v", frames[1:], want)
	}

	frames = postFrames(t, e.url, "/process.Process/Connect", `{"process":{"pid":999999}}`)
	if len(frames) != 1 || frames[0].flags != 2 {
		t.Fatalf("connect to a missing pid: %v", frames)
	}
	if e, _ := frames[0].body["error"].(map[string]any); e["code"] != "not_found" || e["message"] == "" {
		t.Fatalf("error frame %v", frames[0].body)
	}
}
