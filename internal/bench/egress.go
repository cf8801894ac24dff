package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/network/fakenet"
)

// The egress suite: what the egress proxy costs a sandbox's HTTPS, on a
// fake internet (fakenet.ServeHTTPS). Requests are made from the sandbox's
// network namespace by the bench (a Go client with keep-alive), so the
// figures are the path's, not a shell's start-up.

// EgressOptions tune the egress suite.
type EgressOptions struct {
	Options
	// Requests are the keep-alive requests timed on each path.
	Requests int
	// DownloadMB is the size of each download; Downloads how many of each
	// kind.
	DownloadMB int
	Downloads  int
	Progress   io.Writer
}

// EgressReport is the egress suite's result.
type EgressReport struct {
	Machine string `json:"machine"`
	// Intercepted: HTTPS requests to a host with rules (terminated by the
	// proxy, a header and a secret put in, sent on over a warm upstream
	// connection). Spliced: the same requests to a host without rules
	// (bytes copied, never decrypted). Both on warm client connections.
	Intercepted    Stats   `json:"intercepted_request"`
	Spliced        Stats   `json:"spliced_request"`
	AddedP50Ms     float64 `json:"intercept_added_p50_ms"`
	AddedP99Ms     float64 `json:"intercept_added_p99_ms"`
	AddedTargetMs  float64 `json:"intercept_added_target_p50_ms"`
	AddedTargetMet bool    `json:"intercept_added_met"`
	// Download: an HTTPS download spliced by the proxy (a sandbox with
	// rules, to a host without) against the same download by a sandbox
	// without rules (no proxy at all), alternated.
	DownloadBytes     int64   `json:"download_bytes"`
	SplicedMBps       float64 `json:"download_spliced_p50_mbps"`
	DirectMBps        float64 `json:"download_direct_p50_mbps"`
	DownloadRatio     float64 `json:"download_ratio"`
	DownloadTarget    float64 `json:"download_ratio_target"`
	DownloadTargetMet bool    `json:"download_ratio_met"`
}

func (o *EgressOptions) defaults() {
	if o.Requests <= 0 {
		o.Requests = 200
	}
	if o.DownloadMB <= 0 {
		o.DownloadMB = 100
	}
	if o.Downloads <= 0 {
		o.Downloads = 9
	}
}

// RunEgress runs the egress suite.
func RunEgress(ctx context.Context, opts EgressOptions) (_ EgressReport, retErr error) {
	opts.defaults()
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	netDir, err := os.MkdirTemp("", "warren-bench-egress-")
	if err != nil {
		return EgressReport{}, err
	}
	in, err := fakenet.New(netDir)
	if err != nil {
		os.RemoveAll(netDir)
		return EgressReport{}, err
	}
	runDir := filepath.Join(netDir, "run")
	defer func() {
		retErr = errors.Join(retErr, fakenet.UnmountUnder(runDir), in.Close(), os.RemoveAll(netDir))
	}()
	caPath, err := in.ServeHTTPS(netDir)
	if err != nil {
		return EgressReport{}, err
	}
	h, err := startHarness(ctx, opts.Options, func(cfg *config.Config) {
		cfg.ImageSize = 2 << 30
		cfg.Network.Enabled = true
		cfg.Network.NetNS = in.HostNS
		cfg.Network.Uplink = fakenet.UplinkName
		cfg.Network.DNS = fakenet.UpstreamDNS
		cfg.Network.RunDir = runDir
		cfg.Network.Subnet = "10.88.0.0/24"
		cfg.Network.EgressExtraRoots = caPath
	})
	if err != nil {
		return EgressReport{}, err
	}
	defer func() { retErr = errors.Join(retErr, h.close()) }()
	rep := EgressReport{Machine: machine(), AddedTargetMs: 2, DownloadTarget: 0.9, DownloadBytes: int64(opts.DownloadMB) << 20}
	if _, err := h.c.Secrets.Create(ctx, client.NewSecret{Name: "bench-token", Value: "bench-value", AllowedHosts: []string{"allowed.example"}}); err != nil {
		return rep, err
	}
	names := []string{"allowed.example", "other.example"}
	rule := client.NetworkRule{Transform: &client.NetworkTransform{Headers: map[string]string{"Authorization": "Bearer " + client.Placeholder("bench-token")}}}
	proxied, err := egressSandbox(ctx, h, &client.Network{AllowOut: names, DenyOut: []string{"0.0.0.0/0"}, Rules: map[string][]client.NetworkRule{"allowed.example": {rule}}})
	if err != nil {
		return rep, err
	}
	direct, err := egressSandbox(ctx, h, &client.Network{AllowOut: names, DenyOut: []string{"0.0.0.0/0"}})
	if err != nil {
		return rep, err
	}
	warrenCA, err := os.ReadFile(filepath.Join(h.cfg.DataDir, "egress-ca", "ca.pem"))
	if err != nil {
		return rep, err
	}
	upstreamCA, err := os.ReadFile(caPath)
	if err != nil {
		return rep, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(warrenCA)
	roots.AppendCertsFromPEM(upstreamCA)
	viaProxy := nsClient(filepath.Join(runDir, "netns", proxied), roots)
	noProxy := nsClient(filepath.Join(runDir, "netns", direct), roots)

	fmt.Fprintf(progress, "egress: %d keep-alive requests intercepted and spliced\n", opts.Requests)
	if err := measureEgressRequests(ctx, viaProxy, opts.Requests, &rep); err != nil {
		return rep, err
	}
	fmt.Fprintf(progress, "egress: %d downloads of %d MB spliced and direct\n", opts.Downloads, opts.DownloadMB)
	return rep, measureEgressDownloads(ctx, viaProxy, noProxy, opts.Downloads, &rep)
}

// measureEgressRequests times requests to a host with rules and to one
// without, alternated, on warm connections.
func measureEgressRequests(ctx context.Context, viaProxy *http.Client, n int, rep *EgressReport) error {
	var inter, splice []time.Duration
	for i := range n + 10 {
		a, err := timedGet(ctx, viaProxy, "https://allowed.example/", "Authorization: Bearer bench-value")
		if err != nil {
			return fmt.Errorf("intercepted request: %w", err)
		}
		b, err := timedGet(ctx, viaProxy, "https://other.example/", "")
		if err != nil {
			return fmt.Errorf("spliced request: %w", err)
		}
		if i >= 10 { // the first ones warm both ends
			inter, splice = append(inter, a), append(splice, b)
		}
	}
	rep.Intercepted, rep.Spliced = Summarise(inter), Summarise(splice)
	rep.AddedP50Ms = rounded(rep.Intercepted.P50 - rep.Spliced.P50)
	rep.AddedP99Ms = rounded(rep.Intercepted.P99 - rep.Spliced.P99)
	rep.AddedTargetMet = rep.AddedP50Ms <= rep.AddedTargetMs
	return nil
}

// measureEgressDownloads times downloads spliced by the proxy and made
// with no proxy, alternating which goes first.
func measureEgressDownloads(ctx context.Context, viaProxy, noProxy *http.Client, n int, rep *EgressReport) error {
	url := fmt.Sprintf("https://other.example/download?bytes=%d", rep.DownloadBytes)
	var spl, dir []float64
	for i := range n + 1 {
		first, second := viaProxy, noProxy
		if i%2 == 1 {
			first, second = noProxy, viaProxy
		}
		a, err := timedGet(ctx, first, url, "")
		if err != nil {
			return fmt.Errorf("download: %w", err)
		}
		b, err := timedGet(ctx, second, url, "")
		if err != nil {
			return fmt.Errorf("download: %w", err)
		}
		if i%2 == 1 {
			a, b = b, a
		}
		if i > 0 {
			spl, dir = append(spl, mbps(rep.DownloadBytes, a)), append(dir, mbps(rep.DownloadBytes, b))
		}
	}
	rep.SplicedMBps, rep.DirectMBps = rounded(median(spl)), rounded(median(dir))
	if rep.DirectMBps > 0 {
		rep.DownloadRatio = rounded(rep.SplicedMBps / rep.DirectMBps)
	}
	rep.DownloadTargetMet = rep.DownloadRatio >= rep.DownloadTarget
	return nil
}

// egressSandbox creates a busybox sandbox with policy and has it look up
// the upstream names (which opens them).
func egressSandbox(ctx context.Context, h *harness, policy *client.Network) (string, error) {
	sb, err := h.c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: h.tmpl, Network: policy})
	if err != nil {
		return "", err
	}
	for _, n := range policy.AllowOut {
		if _, err := h.c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Command: "nslookup " + n}); err != nil {
			return "", err
		}
	}
	return sb.SandboxID, nil
}

// nsClient is an HTTP client whose connections are made in the network
// namespace at nsPath (a sandbox's), and kept alive.
func nsClient(nsPath string, roots *x509.CertPool) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			// The fake names are dialled by their addresses (the
			// sandbox's resolver answered the same when it looked them
			// up; the bench's own resolver does not know them).
			if host, port, err := net.SplitHostPort(addr); err == nil && fakenet.HTTPSNames[host] != "" {
				addr = net.JoinHostPort(fakenet.HTTPSNames[host], port)
			}
			var c net.Conn
			err := fakenet.InNS(nsPath, func() (err error) {
				var d net.Dialer
				c, err = d.DialContext(ctx, "tcp4", addr)
				return err
			})
			return c, err
		},
		TLSClientConfig:     &tls.Config{RootCAs: roots},
		MaxIdleConnsPerHost: 4,
		DisableCompression:  true,
	}}
}

// timedGet GETs url and reads the whole answer; want, if set, must be in
// it.
func timedGet(ctx context.Context, c *http.Client, url, want string) (time.Duration, error) {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return d, nil
}
