package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/template"
)

// PortRouteReport is the cost of reaching a server inside a sandbox through
// the daemon's port route (reverse proxy, then a tunnel through the agent
// link to the sandbox's loopback), against the naive baseline: the same
// server binary on the host's loopback, fetched directly. The client is a
// process of its own, as a real caller is, and the three kinds of request
// take turns in one run (portRun of a kind at a time), so a noisy
// neighbour slows them alike.
type PortRouteReport struct {
	Server   string `json:"server"`
	Client   string `json:"client"`
	Requests int    `json:"requests"`
	// Headers: GET /index.html routed by E2b-Sandbox-Id and E2b-Sandbox-Port,
	// with the sandbox's traffic token.
	Headers Stats `json:"port_route_headers"`
	// Host: the same routed by Host <port>-<id>.<domain>, with the sandbox's
	// envd access token.
	Host Stats `json:"port_route_host"`
	// TLS: the Host-routed GET over the TLS listener (warren's own CA),
	// https://<port>-<id>.<domain>:<tls port>, on a kept-alive connection:
	// what TLS adds once the handshake is done.
	TLS Stats `json:"port_route_tls"`
	// Direct: the baseline, straight to the host's loopback.
	Direct Stats `json:"direct_loopback"`
	// AddedP50Ms is Headers p50 - Direct p50 (AddedHostP50Ms the same for
	// Host routing); RatioP50 is Headers p50 / Direct p50.
	AddedP50Ms     float64 `json:"added_p50_ms"`
	AddedHostP50Ms float64 `json:"added_host_p50_ms"`
	RatioP50       float64 `json:"ratio_p50"`
	TargetAddedMs  float64 `json:"targetAddedMs"`
	Met            bool    `json:"met"`
	// AddedTLSP50Ms is TLS p50 - Host p50 (the same route in plain HTTP,
	// its naive baseline); TLSRatioP50 is TLS p50 / Host p50.
	AddedTLSP50Ms    float64 `json:"added_tls_p50_ms"`
	TLSRatioP50      float64 `json:"tls_ratio_p50"`
	TargetTLSAddedMs float64 `json:"targetTLSAddedMs"`
	TLSMet           bool    `json:"tls_met"`
}

// portRun is how many GETs of a kind the port-route item makes in a row.
// A GET through the route leaves work behind it (the tunnel's teardown, in
// the daemon and the agent) that the next request competes with; were the
// kinds alternated one by one, the baseline's GET would pay for it.
const portRun = 10

// benchPort is where the sandbox's server listens.
const benchPort = 8000

// benchPage is the page fetched: small, so the numbers are the route's cost
// and not a copy's.
var benchPage = strings.Repeat("warren port route benchmark\n", 8)

// HTTPRequest is one kind of GET the timing client makes.
type HTTPRequest struct {
	URL    string            `json:"url"`
	Host   string            `json:"host,omitempty"`
	Header map[string]string `json:"header,omitempty"`
}

// HTTPTiming is what the timing client is asked to do: Warmup untimed
// rounds of one GET of each kind, then N timed GETs of each kind, made Run
// of a kind in a row with the kinds taking turns, in an order that rotates
// so that no kind always follows the same one.
type HTTPTiming struct {
	Requests []HTTPRequest `json:"requests"`
	N        int           `json:"n"`
	Warmup   int           `json:"warmup"`
	// Run is how many GETs of one kind are made in a row (at least 1).
	Run int `json:"run"`
	// CA is a PEM certificate the client trusts for https URLs (warren's
	// own CA), beside the system's.
	CA string `json:"ca,omitempty"`
}

// measurePortRoute runs the host's busybox httpd in sandbox sb and on the
// host and times n GETs of each kind, from a client process of its own when
// warrenBinary is set (`warren bench --http-client`), else from this one.
func measurePortRoute(ctx context.Context, h *harness, sb client.Sandbox, n int, warrenBinary string) (_ PortRouteReport, retErr error) {
	rep := PortRouteReport{Server: "busybox httpd (a process per connection, Connection: close)", Requests: n, TargetAddedMs: 1, TargetTLSAddedMs: 1}
	id := sb.SandboxID
	if err := startHTTPD(ctx, h.c, id); err != nil {
		return rep, err
	}

	direct, stop, err := hostHTTPD(ctx)
	if err != nil {
		return rep, err
	}
	defer func() { retErr = errors.Join(retErr, stop()) }()

	proxied := "http://" + h.addr + "/index.html"
	host := fmt.Sprintf("%d-%s.%s", benchPort, id, h.cfg.Domain)
	ca, err := h.c.Meta.TLSCA(ctx)
	if err != nil {
		return rep, fmt.Errorf("warren's CA: %w", err)
	}
	_, tlsPort, _ := net.SplitHostPort(h.cfg.TLS.Listen)
	spec := HTTPTiming{N: n, Warmup: 20, Run: portRun, CA: string(ca), Requests: []HTTPRequest{
		{URL: "http://" + direct + "/index.html"},
		h.routedByHeaders(sb),
		{URL: proxied, Host: host, Header: map[string]string{"X-Access-Token": sb.EnvdAccessToken}},
		// By name, as users open it: *.localhost resolves to loopback.
		{URL: "https://" + net.JoinHostPort(host, tlsPort) + "/index.html", Header: map[string]string{"X-Access-Token": sb.EnvdAccessToken}},
	}}
	// Both servers start in the background: wait until each answers.
	hc, err := newHTTPClient(spec.CA)
	if err != nil {
		return rep, err
	}
	defer hc.CloseIdleConnections()
	for _, req := range spec.Requests {
		if err := untilOK(ctx, func() error { return get(ctx, hc, req) }); err != nil {
			return rep, err
		}
	}
	var samples [][]time.Duration
	if warrenBinary != "" {
		rep.Client = "a process of its own (warren bench --http-client)"
		samples, err = timeInChild(ctx, warrenBinary, spec)
	} else {
		rep.Client = "in the daemon's process"
		samples, err = TimeHTTP(ctx, spec)
	}
	if err != nil {
		return rep, err
	}
	rep.Direct, rep.Headers, rep.Host = Summarise(samples[0]), Summarise(samples[1]), Summarise(samples[2])
	rep.TLS = Summarise(samples[3])
	rep.AddedP50Ms = round3(rep.Headers.P50 - rep.Direct.P50)
	rep.AddedHostP50Ms = round3(rep.Host.P50 - rep.Direct.P50)
	rep.RatioP50 = ratio(rep.Headers, rep.Direct)
	rep.Met = rep.AddedP50Ms <= rep.TargetAddedMs
	rep.AddedTLSP50Ms = round3(rep.TLS.P50 - rep.Host.P50)
	rep.TLSRatioP50 = ratio(rep.TLS, rep.Host)
	rep.TLSMet = rep.AddedTLSP50Ms <= rep.TargetTLSAddedMs
	return rep, nil
}

// startHTTPD starts busybox httpd in sandbox id on benchPort, serving
// benchPage from /www. It answers a moment later: wait with untilOK.
func startHTTPD(ctx context.Context, c *client.Client, id string) error {
	if _, err := c.Files.MakeDir(ctx, id, "/www"); err != nil {
		return err
	}
	if _, err := c.Files.Write(ctx, id, "/www/index.html", strings.NewReader(benchPage), 0o644, ""); err != nil {
		return err
	}
	// The host's busybox, copied in: the same server as the host's baseline,
	// and one that runs whatever the template has.
	bb, err := os.Open(template.DefaultBusybox)
	if err != nil {
		return fmt.Errorf("the port-route item runs busybox httpd (install busybox-static): %w", err)
	}
	_, err = c.Files.Write(ctx, id, "/www/busybox", bb, 0o755, "")
	bb.Close()
	if err != nil {
		return err
	}
	inside := []string{"/www/busybox", "httpd", "-f", "-p", "127.0.0.1:" + strconv.Itoa(benchPort), "-h", "/www"}
	if _, err := c.Processes.Start(ctx, id, client.StartProcessRequest{Tag: "bench-httpd", ExecRequest: client.ExecRequest{Cmd: inside}}); err != nil {
		return fmt.Errorf("start httpd in the sandbox: %w", err)
	}
	return nil
}

// routedByHeaders is a GET of benchPage from sandbox sb's httpd through the
// daemon's port route, routed by the E2b-Sandbox-Id and -Port headers with
// the sandbox's traffic token.
func (h *harness) routedByHeaders(sb client.Sandbox) HTTPRequest {
	return HTTPRequest{URL: "http://" + h.addr + "/index.html", Header: map[string]string{
		"E2b-Sandbox-Id": sb.SandboxID, "E2b-Sandbox-Port": strconv.Itoa(benchPort), "E2b-Traffic-Access-Token": sb.TrafficAccessToken,
	}}
}

// TimeHTTP makes the GETs spec asks for and returns each kind's durations.
func TimeHTTP(ctx context.Context, spec HTTPTiming) ([][]time.Duration, error) {
	hc, err := newHTTPClient(spec.CA)
	if err != nil {
		return nil, err
	}
	defer hc.CloseIdleConnections()
	for range spec.Warmup {
		for _, req := range spec.Requests {
			if err := get(ctx, hc, req); err != nil {
				return nil, err
			}
		}
	}
	run := max(spec.Run, 1)
	samples := make([][]time.Duration, len(spec.Requests))
	for i := 0; i < spec.N; i += run {
		for j := range spec.Requests {
			k := (i/run + j) % len(spec.Requests)
			for range min(run, spec.N-i) {
				start := time.Now()
				if err := get(ctx, hc, spec.Requests[k]); err != nil {
					return nil, err
				}
				samples[k] = append(samples[k], time.Since(start))
			}
		}
	}
	return samples, nil
}

// RunHTTPClient is `warren bench --http-client`: it reads an HTTPTiming as
// JSON from in and writes each kind's durations (in ns) as JSON to out.
func RunHTTPClient(ctx context.Context, in io.Reader, out io.Writer) error {
	var spec HTTPTiming
	if err := json.NewDecoder(in).Decode(&spec); err != nil {
		return fmt.Errorf("read the timing spec: %w", err)
	}
	samples, err := TimeHTTP(ctx, spec)
	if err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(samples)
}

// timeInChild runs the timing client as `warren bench --http-client`.
func timeInChild(ctx context.Context, warrenBinary string, spec HTTPTiming) ([][]time.Duration, error) {
	in, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd := exec.CommandContext(ctx, warrenBinary, "bench", "--http-client")
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("timing client: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var samples [][]time.Duration
	if err := json.Unmarshal(out, &samples); err != nil || len(samples) != len(spec.Requests) {
		return nil, fmt.Errorf("timing client printed %.200q: %v", out, err)
	}
	return samples, nil
}

// newHTTPClient keeps connections alive where the server does (the daemon;
// busybox httpd closes each), trusting the PEM CA beside the system's.
func newHTTPClient(ca string) (*http.Client, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}
	if ca != "" {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM([]byte(ca)) {
			return nil, errors.New("the timing client's CA is not a PEM certificate")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}, nil
}

// get makes one GET and checks that the page came back.
func get(ctx context.Context, hc *http.Client, r HTTPRequest) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL, nil)
	if err != nil {
		return err
	}
	if r.Host != "" {
		req.Host = r.Host
	}
	for k, v := range r.Header {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("GET %s (Host %s): %w", r.URL, req.Host, err)
	}
	if resp.StatusCode != http.StatusOK || string(b) != benchPage {
		return &statusError{code: resp.StatusCode, msg: fmt.Sprintf("GET %s (Host %s): %s %.200s", r.URL, req.Host, resp.Status, b)}
	}
	return nil
}

type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

// untilOK retries fn while the server is not up yet (connection refused
// directly, 502 through the daemon), for up to 10 s.
func untilOK(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := fn()
		if err == nil {
			return nil
		}
		var se *statusError
		notYet := errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &se) && se.code == http.StatusBadGateway)
		if !notYet || time.Now().After(deadline) {
			return fmt.Errorf("server not answering: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// hostHTTPD starts the host's busybox (the binary the template copies) as
// httpd on a free loopback port, serving benchPage; stop ends it and
// removes its directory.
func hostHTTPD(ctx context.Context) (addr string, stop func() error, err error) {
	dir, err := os.MkdirTemp("", "warren-bench-httpd-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() error { return os.RemoveAll(dir) }
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte(benchPage), 0o644); err != nil {
		return "", nil, errors.Join(err, cleanup())
	}
	// Take a free port, then let httpd have it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, errors.Join(err, cleanup())
	}
	addr = l.Addr().String()
	l.Close()
	cmd := exec.CommandContext(ctx, template.DefaultBusybox, "httpd", "-f", "-p", addr, "-h", dir)
	if err := cmd.Start(); err != nil {
		return "", nil, errors.Join(fmt.Errorf("start the host's busybox httpd (the baseline): %w", err), cleanup())
	}
	return addr, func() error {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return cleanup()
	}, nil
}

func round3(f float64) float64 {
	if f < 0 {
		return -round3(-f)
	}
	return float64(int(f*1000+0.5)) / 1000
}

// freeLoopback returns a loopback address that was free a moment ago.
func freeLoopback() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
