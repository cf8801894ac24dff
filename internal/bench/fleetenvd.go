//go:build kube

package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"time"
)

// envdPlane is where the E2B SDK's sandbox-plane calls for one sandbox go:
// the gateway's or a node's address, the sandbox's headers.
type envdPlane struct {
	hc     *http.Client
	addr   string // host:port
	sandID string
	token  string // the sandbox's envd access token, when it has one
	key    string
}

// startTrue is `commands.run('true')` as the SDK sends it: a Connect
// server-stream request of one enveloped JSON message.
var startTrue = func() []byte {
	msg := []byte(`{"process":{"cmd":"/bin/sh","args":["-c","true"]}}`)
	env := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(env[1:], uint32(len(msg)))
	return append(env, msg...)
}()

// execTrue runs `true` through process.Process/Start and reads the stream
// to its end, returning how long that took.
func (p envdPlane) execTrue(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.addr+"/process.Process/Start", bytes.NewReader(startTrue))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("E2b-Sandbox-Id", p.sandID)
	req.Header.Set("E2b-Sandbox-Port", "49983")
	req.Header.Set("X-API-Key", p.key)
	if p.token != "" {
		req.Header.Set("X-Access-Token", p.token)
	}
	res, err := p.hc.Do(req)
	if err != nil {
		return 0, err
	}
	body, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	took := time.Since(start)
	if err != nil {
		return 0, err
	}
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("process.Process/Start: %d %s", res.StatusCode, body)
	}
	return took, streamEndsClean(body)
}

// streamEndsClean checks a Connect stream's frames: an end event, then an
// end-of-stream frame with no error.
func streamEndsClean(body []byte) error {
	sawEnd := false
	for len(body) >= 5 {
		flag, n := body[0], int(binary.BigEndian.Uint32(body[1:5]))
		if 5+n > len(body) {
			break
		}
		msg := body[5 : 5+n]
		body = body[5+n:]
		if flag&0x02 != 0 {
			if bytes.Contains(msg, []byte(`"error"`)) || !sawEnd {
				return fmt.Errorf("process.Process/Start ended with %s (end event seen: %v)", msg, sawEnd)
			}
			return nil
		}
		sawEnd = sawEnd || bytes.Contains(msg, []byte(`"end"`))
	}
	return fmt.Errorf("process.Process/Start: the stream has no end-of-stream frame")
}
