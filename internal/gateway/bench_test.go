package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/kube/fleet"
	"github.com/warrenhq/warren/internal/kube/kubetest"
)

// BenchmarkGatewayOverhead measures the latency the gateway adds: the same
// create and exec-sized calls sent to a loopback node stub directly and
// through the gateway (its memo routing the exec), interleaved, b.N of
// each. It prints the percentiles as JSON, for the budget (≤ 3 ms
// added to a create, ≤ 0.5 ms to an exec):
//
//	KUBEBUILDER_ASSETS=... go test -run '^$' -bench GatewayOverhead -benchtime 2000x ./internal/gateway/
func BenchmarkGatewayOverhead(b *testing.B) {
	fb := benchFleet(b)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	create := func(base string) func() error {
		return func() error {
			return post(hc, base+"/sandboxes", fb.admin, `{"templateID":"base"}`, http.StatusCreated)
		}
	}
	exec := func(base string) func() error {
		return func() error {
			return post(hc, base+"/sandboxes/asb1/exec", fb.admin, `{"cmd":["true"]}`, http.StatusOK)
		}
	}
	if err := create(fb.gw)(); err != nil { // asb1, memoised on node a
		b.Fatal(err)
	}
	report := map[string]latency{}
	for _, c := range []struct {
		name            string
		direct, through func() error
	}{
		{"create", create(fb.node), create(fb.gw)},
		{"exec", exec(fb.node), exec(fb.gw)},
	} {
		direct, through := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
		for range b.N {
			for _, s := range []struct {
				call func() error
				out  *[]time.Duration
			}{{c.direct, &direct}, {c.through, &through}} {
				start := time.Now()
				if err := s.call(); err != nil {
					b.Fatal(err)
				}
				*s.out = append(*s.out, time.Since(start))
			}
		}
		l := latencyOf(direct, through)
		report[c.name] = l
		b.ReportMetric(l.AddedP50us, c.name+"-added-p50-µs")
		b.ReportMetric(l.AddedP99us, c.name+"-added-p99-µs")
	}
	if b.N >= 100 {
		out, _ := json.MarshalIndent(map[string]any{"samples": b.N, "gatewayOverhead": report}, "", "  ")
		fmt.Println(string(out))
	}
}

// benchTargets are a gateway and, behind it, the one node stub it routes
// to, both on loopback.
type benchTargets struct {
	gw, node, admin string
	g               *Gateway
	f               *fleetTest
}

func benchFleet(b *testing.B) benchTargets {
	f := &fleetTest{t: b, env: kubetest.Start(b), a: newStubNode(b, "a")}
	f.namespace(testNS)
	f.register(f.a, 32<<30, 0)
	gw, admin := f.gateway(b.Context(), testNS)
	return benchTargets{gw: gw.URL, node: f.a.srv.URL, admin: admin, g: gw.Config.Handler.(*Gateway), f: f}
}

// BenchmarkGatewayPhases times the steps of a routed request before the
// proxy, one sub-benchmark each: the key's check, finding a sandbox's node
// from its Sandbox object, and reading the fleet's nodes (placement's
// input).
//
//	KUBEBUILDER_ASSETS=... go test -run '^$' -bench GatewayPhases ./internal/gateway/
func BenchmarkGatewayPhases(b *testing.B) {
	fb := benchFleet(b)
	ctx := b.Context()
	sb := &warrenv1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "phasesb", Namespace: testNS,
		Labels: map[string]string{fleet.LabelSandboxID: "phasesb", fleet.LabelNode: "a"}}}
	if err := fb.f.env.Client.Create(ctx, sb); err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/sandboxes/phasesb", nil)
	req.Header.Set("X-API-Key", fb.admin)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, ok, _ := fb.g.fleet.SandboxNode(ctx, "phasesb"); ok {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the Sandbox object did not reach the gateway's view")
		}
	}
	b.Run("authenticate", func(b *testing.B) {
		for b.Loop() {
			if _, err := fb.g.keys.authenticate(apiKeyOf(req)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("locate-by-object", func(b *testing.B) {
		for b.Loop() {
			if _, err := fb.g.locateSandbox(ctx, req, "phasesb", false); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("nodes", func(b *testing.B) {
		for b.Loop() {
			if _, err := fb.g.fleet.Nodes(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// latency compares direct and proxied samples, in microseconds.
type latency struct {
	DirectP50us  float64 `json:"directP50us"`
	DirectP99us  float64 `json:"directP99us"`
	GatewayP50us float64 `json:"gatewayP50us"`
	GatewayP99us float64 `json:"gatewayP99us"`
	AddedP50us   float64 `json:"addedP50us"`
	AddedP99us   float64 `json:"addedP99us"`
}

func latencyOf(direct, through []time.Duration) latency {
	pct := func(ds []time.Duration, p float64) float64 {
		s := slices.Clone(ds)
		slices.Sort(s)
		return float64(s[int(p*float64(len(s)-1))].Nanoseconds()) / 1e3
	}
	l := latency{
		DirectP50us: pct(direct, 0.50), DirectP99us: pct(direct, 0.99),
		GatewayP50us: pct(through, 0.50), GatewayP99us: pct(through, 0.99),
	}
	l.AddedP50us, l.AddedP99us = l.GatewayP50us-l.DirectP50us, l.GatewayP99us-l.DirectP99us
	return l
}

func post(hc *http.Client, url, key, body string, want int) error {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return err
	}
	req.Header.Set("X-API-Key", key)
	req.Header.Set("Content-Type", "application/json")
	res, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		return err
	}
	if res.StatusCode != want {
		return fmt.Errorf("POST %s: %d, want %d", url, res.StatusCode, want)
	}
	return nil
}
