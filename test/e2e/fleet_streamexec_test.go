package e2e

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestFleetStreamedExecPacing checks that coalescing a streamed exec's
// events (the agent's flushes, the gateway's) never holds one back: in
// `echo a; sleep 1; echo b` started the E2B SDK's way through a gateway,
// a reaches the client while b is still a second away.
func TestFleetStreamedExecPacing(t *testing.T) {
	t.Parallel()
	f := startFleet(t, 1, 1)
	ctx := ctxT(t, 3*time.Minute)
	key := f.adminKey(ctx)
	base := "http://" + f.gateways[0].addr

	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/sandboxes", strings.NewReader(`{"templateID":"bb","timeout":120}`))
	req.Header.Set("X-API-KEY", key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	var sb struct{ SandboxID, EnvdAccessToken string }
	if res.StatusCode != http.StatusCreated || json.Unmarshal(b, &sb) != nil {
		t.Fatalf("POST /sandboxes through the gateway: %d %s", res.StatusCode, b)
	}

	msg := []byte(`{"process":{"cmd":"/bin/sh","args":["-c","echo a; sleep 1; echo b"]}}`)
	body := append([]byte{0, 0, 0, 0, 0}, msg...)
	binary.BigEndian.PutUint32(body[1:5], uint32(len(msg)))
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, base+"/process.Process/Start", bytes.NewReader(body))
	for k, v := range map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "E2b-Sandbox-Port": "49983", "X-Access-Token": sb.EnvdAccessToken, "Content-Type": "application/connect+json", "Connect-Protocol-Version": "1"} {
		req.Header.Set(k, v)
	}
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("process.Process/Start: %d %s", res.StatusCode, b)
	}
	arrived := map[string]time.Time{}
	var order []string
	br := bufio.NewReader(res.Body)
	for {
		var head [5]byte
		if _, err := io.ReadFull(br, head[:]); err != nil {
			t.Fatalf("stream ended without its end-of-stream message (events %v): %v", order, err)
		}
		m := make([]byte, binary.BigEndian.Uint32(head[1:]))
		if _, err := io.ReadFull(br, m); err != nil {
			t.Fatal(err)
		}
		if head[0]&2 != 0 {
			if !strings.Contains(string(m), "{}") && strings.Contains(string(m), "error") {
				t.Fatalf("stream ended with %s", m)
			}
			break
		}
		var ev struct {
			Event struct {
				Start *struct{}
				Data  *struct{ Stdout string }
				End   *struct{}
			}
		}
		if err := json.Unmarshal(m, &ev); err != nil {
			t.Fatalf("event %s: %v", m, err)
		}
		name := "other"
		switch {
		case ev.Event.Start != nil:
			name = "start"
		case ev.Event.Data != nil:
			out, _ := base64.StdEncoding.DecodeString(ev.Event.Data.Stdout)
			name = strings.TrimSpace(string(out))
		case ev.Event.End != nil:
			name = "end"
		}
		order = append(order, name)
		arrived[name] = time.Now()
	}
	if strings.Join(order, ",") != "start,a,b,end" {
		t.Fatalf("events %v, want start, a, b, end", order)
	}
	if gap := arrived["b"].Sub(arrived["a"]); gap < 700*time.Millisecond {
		t.Errorf("a arrived only %s before b: it was held back until b was written", gap)
	}
	if gap := arrived["a"].Sub(arrived["start"]); gap > 500*time.Millisecond {
		t.Errorf("a arrived %s after the start: held back", gap)
	}
	countReads(t, f.gateways[0], sb.SandboxID, sb.EnvdAccessToken)
}

// readCounter counts the reads that brought data.
type readCounter struct {
	net.Conn
	reads int
}

func (r *readCounter) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	if n > 0 {
		r.reads++
	}
	return n, err
}

// countReads runs `true` the SDK's way through the gateway on a raw
// connection and counts the reads its answer takes: the headers with the
// start, then the end, the end-of-stream message and the body's end
// together. Each event in its own write (as before coalescing) took four
// or five; a reader slower than the writes may need fewer, never more.
func countReads(t *testing.T, g *gatewayProc, id, token string) {
	gateway := g.addr
	msg := []byte(`{"process":{"cmd":"/bin/sh","args":["-c","true"]}}`)
	body := append([]byte{0, 0, 0, 0, 0}, msg...)
	binary.BigEndian.PutUint32(body[1:5], uint32(len(msg)))
	head := "POST /process.Process/Start HTTP/1.1\r\nHost: " + gateway + "\r\nE2b-Sandbox-Id: " + id + "\r\nE2b-Sandbox-Port: 49983\r\nX-Access-Token: " + token +
		"\r\nContent-Type: application/connect+json\r\nConnect-Protocol-Version: 1\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	nc, err := net.Dial("tcp", gateway)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := &readCounter{Conn: nc}
	br := bufio.NewReaderSize(c, 64<<10)
	var counts []int
	const counted, timed = 20, 500
	var cpuBefore time.Duration
	began := time.Now()
	for i := range counted + timed {
		if i == counted {
			cpuBefore, began = cpuOf(t, g.cmd.Process.Pid), time.Now()
		}
		c.reads = 0
		_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := nc.Write(append([]byte(head), body...)); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(res.Body)
		if err != nil || res.StatusCode != http.StatusOK || !bytes.Contains(got, []byte(`"end"`)) {
			t.Fatalf("answer %d %q, %v", res.StatusCode, got, err)
		}
		counts = append(counts, c.reads)
	}
	t.Logf("%d more: %s each, the gateway's CPU %s each", timed, time.Since(began)/timed, (cpuOf(t, g.cmd.Process.Pid)-cpuBefore)/timed)
	counts = counts[:counted]
	slices.Sort(counts)
	t.Logf("reads per streamed exec of true through the gateway: %v", counts)
	if median := counts[len(counts)/2]; median > 2 {
		t.Errorf("a streamed exec of true took a median of %d reads (%v), want at most 2: its events leave the node or the gateway one write each", median, counts)
	}
}

// cpuOf is the CPU time pid's threads have run, from their schedstat (ns).
func cpuOf(t *testing.T, pid int) time.Duration {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var sum time.Duration
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a thread that ended meanwhile
		}
		ns, _ := strconv.ParseInt(strings.Fields(string(b))[0], 10, 64)
		sum += time.Duration(ns)
	}
	if len(files) == 0 {
		t.Fatalf("no threads of %d", pid)
	}
	return sum
}
