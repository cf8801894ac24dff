package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// upgradeScript answers one HTTP request with 101 and then echoes, the
// smallest server that exercises an Upgrade through the proxy.
const upgradeScript = `#!/bin/sh
cr=$(printf '\r')
while read -r l; do [ "$l" = "$cr" ] && break; done
printf 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n'
exec cat
`

// headersScript answers one HTTP request with the request's header lines as
// its body: what the sandbox's server was sent.
const headersScript = `#!/bin/sh
cr=$(printf '\r')
h=""
while read -r l; do [ "$l" = "$cr" ] && break; h="$h$l
"; done
printf 'HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n%s' "$h"
`

// TestPorts reaches servers inside a sandbox (which has no network) through
// the daemon: E2B's header and Host routing, a WebSocket-style upgrade, the
// error statuses, and `warren port-forward`.
func TestPorts(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t)
	ctx := ctxT(t, 3*time.Minute)
	c := d.client()
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	id := sb.SandboxID
	body := "hello from inside " + id + "\n"
	if _, err := c.Files.MakeDir(ctx, id, "/www"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Files.Write(ctx, id, "/www/index.html", strings.NewReader(body), 0o644, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Files.Write(ctx, id, "/www/up.sh", strings.NewReader(upgradeScript), 0o755, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Files.Write(ctx, id, "/www/headers.sh", strings.NewReader(headersScript), 0o755, ""); err != nil {
		t.Fatal(err)
	}
	for tag, argv := range map[string][]string{
		"httpd":   {"httpd", "-f", "-p", "8000", "-h", "/www"},
		"nc":      {"nc", "-ll", "-p", "8003", "-e", "/www/up.sh"},
		"headers": {"nc", "-ll", "-p", "8004", "-e", "/www/headers.sh"},
	} {
		if _, err := c.Processes.Start(ctx, id, client.StartProcessRequest{Tag: tag, ExecRequest: client.ExecRequest{Cmd: argv}}); err != nil {
			t.Fatalf("start %s: %v", tag, err)
		}
	}

	get := func(key string, hdr map[string]string, host string) (int, string) {
		t.Helper()
		return getIndex(t, ctx, d, key, hdr, host)
	}
	byHeader := map[string]string{"E2b-Sandbox-Id": id, "E2b-Sandbox-Port": "8000"}
	// httpd starts in the background: wait for it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, got := get(d.key, byHeader, "")
		if code == 200 {
			if got != body {
				t.Fatalf("body through headers: %q, want %q", got, body)
			}
			break
		}
		if code != 502 || time.Now().After(deadline) {
			t.Fatalf("GET through headers: %d %s", code, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, got := get(d.key, nil, fmt.Sprintf("8000-%s.localhost", id)); code != 200 || got != body {
		t.Fatalf("GET through Host: %d %q", code, got)
	}
	if code, got := get(d.key, map[string]string{"E2b-Sandbox-Id": id, "E2b-Sandbox-Port": "8001"}, ""); code != 502 || !strings.Contains(got, "8001") {
		t.Fatalf("nothing on 8001: want 502 naming the port, got %d %s", code, got)
	}
	if code, got := get(d.key, map[string]string{"E2b-Sandbox-Id": "nosuchsandbox", "E2b-Sandbox-Port": "8000"}, ""); code != 502 || !strings.Contains(got, `{"code":502,"message":"The sandbox was not found","sandboxId":"nosuchsandbox"}`) {
		t.Fatalf("unknown sandbox: want E2B's 502 The sandbox was not found, got %d %s", code, got)
	}
	if code, got := get("", byHeader, ""); code != 403 || !strings.Contains(got, `"message":"Sandbox is secured with traffic access token. Token header 'e2b-traffic-access-token' is missing"`) {
		t.Fatalf("private port without a credential: want E2B's 403, got %d %s", code, got)
	}
	testPortCredentials(t, d, ctx)
	t.Run("authorization", func(t *testing.T) { testForwardedAuthorization(t, d, sb) })

	t.Run("upgrade", func(t *testing.T) { testUpgrade(t, d, id) })
	t.Run("port-forward", func(t *testing.T) { testPortForward(t, d, id, body) })
	t.Run("latency", func(t *testing.T) { measureProxyLatency(t, d, id) })
}

// getIndex GETs /index.html from the daemon with an API key (or none),
// extra headers and a Host (or the default): through the port route when
// they name a sandbox's port.
func getIndex(t *testing.T, ctx context.Context, d *daemon, key string, hdr map[string]string, host string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+d.addr+"/index.html", nil)
	req.Header.Set("X-API-Key", key)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// testUpgrade sends an Upgrade request through Host routing and talks over
// the upgraded connection.
func testUpgrade(t *testing.T, d *daemon, id string) {
	conn, err := net.DialTimeout("tcp", d.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: 8003-%s.localhost\r\nX-API-Key: %s\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n", id, d.key)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("want 101, got %s %s", resp.Status, b)
	}
	for _, msg := range []string{"ping\n", "pong pong\n"} {
		if _, err := io.WriteString(conn, msg); err != nil {
			t.Fatal(err)
		}
		got, err := br.ReadString('\n')
		if err != nil || got != msg {
			t.Fatalf("echo over the upgraded connection: %q, %v; want %q", got, err, msg)
		}
	}
}

// testPortForward runs `warren port-forward` and fetches the page with a
// plain TCP client.
func testPortForward(t *testing.T, d *daemon, id, body string) {
	cmd := exec.Command(filepath.Join(d.bin, "warren"), "port-forward", id, "8000", "0")
	cmd.Env = append(os.Environ(), "WARREN_URL=http://"+d.addr, "WARREN_API_KEY="+d.key, "WARREN_DATA_DIR="+d.dataDir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("port-forward printed %q, %v; stderr: %s", line, err, stderr.String())
	}
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != "Forwarding" {
		t.Fatalf("port-forward printed %q", line)
	}
	for i := range 3 { // several connections through one forwarder
		conn, err := net.DialTimeout("tcp", f[1], 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		_, _ = io.WriteString(conn, "GET /index.html HTTP/1.0\r\n\r\n")
		got, err := io.ReadAll(conn)
		conn.Close()
		if err != nil || !strings.HasPrefix(string(got), "HTTP/1.") || !strings.HasSuffix(string(got), body) {
			t.Fatalf("connection %d through port-forward: %q, %v; stderr: %s", i, got, err, stderr.String())
		}
	}
}

// measureProxyLatency compares a GET through the daemon's port proxy with a
// GET straight to the same busybox httpd on the host's loopback (the
// baseline: same server, no proxy). Timings are logged, never checked.
func measureProxyLatency(t *testing.T, d *daemon, id string) {
	const n = 200
	timeGets := func(url string, hdr map[string]string) time.Duration {
		var ds []time.Duration
		for range n {
			req, _ := http.NewRequest("GET", url, nil)
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("GET %s (request %d): %s %s", url, len(ds), resp.Status, b)
			}
			ds = append(ds, time.Since(start))
		}
		slices.Sort(ds)
		return ds[n/2]
	}
	proxied := timeGets("http://"+d.addr+"/index.html", map[string]string{"X-API-Key": d.key, "E2b-Sandbox-Id": id, "E2b-Sandbox-Port": "8000"})
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Logf("proxied GET p50 %v (no host busybox for a baseline)", proxied)
		return
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	httpd := exec.Command(bb, "httpd", "-f", "-p", addr, "-h", dir)
	if err := httpd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = httpd.Process.Kill(); _ = httpd.Wait() })
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if i > 100 {
			t.Fatalf("host httpd did not start: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	direct := timeGets("http://"+addr+"/index.html", nil)
	t.Logf("GET p50 over %d requests: proxied %v, direct %v, added %v", n, proxied, direct, proxied-direct)
}

// testPortCredentials checks who may reach a sandbox's ports: by default
// its traffic token, its envd token or its team's key, and not another
// sandbox's tokens or another team's key; with allowPublicTraffic, anyone.
func testPortCredentials(t *testing.T, d *daemon, ctx context.Context) {
	c := d.client()
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	if sb.TrafficAccessToken == "" || sb.TrafficAccessToken == other.TrafficAccessToken || sb.EnvdAccessToken == "" {
		t.Fatalf("tokens: %+v and %+v, want distinct traffic and envd tokens", sb, other)
	}
	public := true
	pub, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Network: &client.Network{AllowPublicTraffic: &public}})
	if err != nil {
		t.Fatal(err)
	}
	if pub.TrafficAccessToken != "" {
		t.Errorf("a public sandbox got a traffic token")
	}
	for _, id := range []string{sb.SandboxID, pub.SandboxID} {
		if _, err := c.Processes.Start(ctx, id, client.StartProcessRequest{Tag: "httpd", ExecRequest: client.ExecRequest{Cmd: []string{"httpd", "-f", "-p", "8000", "-h", "/etc"}}}); err != nil {
			t.Fatal(err)
		}
	}
	k, err := c.APIKeys.Create(ctx, client.NewAPIKey{Team: "other"})
	if err != nil {
		t.Fatal(err)
	}
	get := func(id string, hdr map[string]string) int {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+d.addr+"/hostname", nil)
		req.Header.Set("E2b-Sandbox-Id", id)
		req.Header.Set("E2b-Sandbox-Port", "8000")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, id := range []string{sb.SandboxID, pub.SandboxID} {
		deadline := time.Now().Add(10 * time.Second)
		for code := get(id, map[string]string{"X-API-Key": d.key}); code != 200; code = get(id, map[string]string{"X-API-Key": d.key}) {
			if code != 502 || time.Now().After(deadline) {
				t.Fatalf("own team's key: %d", code)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for what, tc := range map[string]struct {
		hdr  map[string]string
		want int
	}{
		"no credential":               {nil, 403},
		"traffic token":               {map[string]string{"E2b-Traffic-Access-Token": sb.TrafficAccessToken}, 200},
		"envd token":                  {map[string]string{"X-Access-Token": sb.EnvdAccessToken}, 200},
		"other sandbox's traffic":     {map[string]string{"E2b-Traffic-Access-Token": other.TrafficAccessToken}, 403},
		"other sandbox's envd token":  {map[string]string{"X-Access-Token": other.EnvdAccessToken}, 403},
		"envd token as traffic token": {map[string]string{"E2b-Traffic-Access-Token": sb.EnvdAccessToken}, 403},
		"other team's key":            {map[string]string{"X-API-Key": k.Key}, 403},
	} {
		if code := get(sb.SandboxID, tc.hdr); code != tc.want {
			t.Errorf("%s: got %d, want %d", what, code, tc.want)
		}
	}
	if code := get(pub.SandboxID, nil); code != 200 {
		t.Errorf("public sandbox without a credential: got %d, want 200", code)
	}
}

// testForwardedAuthorization checks what a sandbox's server is sent: never
// warren's credentials (API key, the sandbox's tokens, also as a Bearer),
// always the app's own Authorization (Basic, or a Bearer that is not ours).
func testForwardedAuthorization(t *testing.T, d *daemon, sb client.Sandbox) {
	ctx := ctxT(t, time.Minute)
	id := sb.SandboxID
	seen := func(hdr map[string]string) string {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+d.addr+"/echo", nil)
		req.Header.Set("E2b-Sandbox-Id", id)
		req.Header.Set("E2b-Sandbox-Port", "8004")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET with %v: %s %s", hdr, resp.Status, b)
		}
		return string(b)
	}
	// nc starts in the background: wait for it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+d.addr+"/echo", nil)
		req.Header.Set("E2b-Sandbox-Id", id)
		req.Header.Set("E2b-Sandbox-Port", "8004")
		req.Header.Set("X-API-Key", d.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == 200 {
			break
		}
		if resp.StatusCode != 502 || time.Now().After(deadline) {
			t.Fatalf("header echo server: %s", resp.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	const basic = "Basic dXNlcjpwYXNzd29yZA=="
	const appBearer = "Bearer the-apps-own-token"
	for what, tc := range map[string]struct {
		hdr        map[string]string
		want, hide []string
	}{
		"traffic token and the app's Basic": {
			hdr:  map[string]string{"E2b-Traffic-Access-Token": sb.TrafficAccessToken, "Authorization": basic},
			want: []string{"Authorization: " + basic}, hide: []string{sb.TrafficAccessToken},
		},
		"traffic token and the app's Bearer": {
			hdr:  map[string]string{"E2b-Traffic-Access-Token": sb.TrafficAccessToken, "Authorization": appBearer},
			want: []string{"Authorization: " + appBearer}, hide: []string{sb.TrafficAccessToken},
		},
		"API key and the app's Bearer": {
			hdr:  map[string]string{"X-API-Key": d.key, "Authorization": appBearer},
			want: []string{"Authorization: " + appBearer}, hide: []string{d.key},
		},
		"API key as the Bearer": {
			hdr:  map[string]string{"Authorization": "Bearer " + d.key},
			hide: []string{d.key, "Authorization"},
		},
		"API key in both": {
			hdr:  map[string]string{"X-API-Key": d.key, "Authorization": "Bearer " + d.key},
			hide: []string{d.key, "Authorization"},
		},
		"envd token as the Bearer": {
			hdr:  map[string]string{"E2b-Traffic-Access-Token": sb.TrafficAccessToken, "Authorization": "Bearer " + sb.EnvdAccessToken},
			hide: []string{sb.TrafficAccessToken, sb.EnvdAccessToken, "Authorization"},
		},
		"envd token and the app's Basic": {
			hdr:  map[string]string{"X-Access-Token": sb.EnvdAccessToken, "Authorization": basic},
			want: []string{"Authorization: " + basic}, hide: []string{sb.EnvdAccessToken},
		},
	} {
		got := seen(tc.hdr)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: the server was not sent %q; it got:\n%s", what, w, got)
			}
		}
		for _, h := range tc.hide {
			if strings.Contains(got, h) {
				t.Errorf("%s: the server was sent %q; it got:\n%s", what, h, got)
			}
		}
	}
}
