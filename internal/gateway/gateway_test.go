package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	wapi "github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/kube/fleet"
	"github.com/warrenhq/warren/internal/kube/kubetest"
	"github.com/warrenhq/warren/internal/store"
)

const testNS = "warren"

// fleetTest is a control plane, two stub nodes registered in it as Ready
// WarrenNodes with live Leases, and a gateway in front of them.
type fleetTest struct {
	t     testing.TB
	env   *kubetest.Env
	a, b  *stubNode
	gw    *httptest.Server
	admin string // the fleet's admin key
}

func TestGatewayRouting(t *testing.T) {
	env := kubetest.Start(t)
	ctx := t.Context()
	f := &fleetTest{t: t, env: env, a: newStubNode(t, "a"), b: newStubNode(t, "b")}
	f.namespace(testNS)
	// a has more free memory: creates go there.
	f.register(f.a, 32<<30, 4<<30)
	f.register(f.b, 32<<30, 16<<30)
	f.gw, f.admin = f.gateway(ctx, testNS)

	t.Run("create placed and forwarded, then routed by memo", f.createThenMemo)
	t.Run("routed by the Sandbox object cache", f.routedByCache)
	t.Run("routed by probe", f.routedByProbe)
	t.Run("a memo a node denies is dropped", f.memoDenied)
	t.Run("sandbox plane by header and by Host", f.plane)
	t.Run("unknown sandbox is 404", f.unknown)
	t.Run("lists merged and paged", f.listPaged)
	t.Run("lists hold Lost sandboxes", f.listLost)
	t.Run("streams pass unbuffered", f.streams)
	t.Run("port forwarding upgrades pass through", f.upgrade)
	t.Run("api keys are Secrets and authenticate", f.apiKeys)
	t.Run("template builds go to the template's node", f.templateBuilds)
	t.Run("owner that does not answer is 502", f.ownerDown)
	t.Run("no Ready node is 503", f.noReadyNode)
	t.Run("Run serves from a kubeconfig and stops on cancel", f.runAndStop)
}

func (f *fleetTest) namespace(name string) {
	f.t.Helper()
	if err := f.env.Client.Create(f.t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		f.t.Fatal(err)
	}
}

// register writes a stub's WarrenNode (Ready, its endpoint, memory) and
// a live Lease, as a node in Kubernetes mode does.
func (f *fleetTest) register(n *stubNode, capacity, used int64) {
	t, ctx, c := f.t, f.t.Context(), f.env.Client
	t.Helper()
	wn := &warrenv1.WarrenNode{ObjectMeta: metav1.ObjectMeta{Name: n.name}}
	if err := c.Create(ctx, wn); err != nil {
		t.Fatal(err)
	}
	wn.Status = warrenv1.WarrenNodeStatus{
		Endpoint:  n.srv.URL,
		Capacity:  warrenv1.NodeResources{Memory: resource.NewQuantity(capacity, resource.BinarySI)},
		Used:      warrenv1.NodeResources{Memory: resource.NewQuantity(used, resource.BinarySI)},
		Runtimes:  []string{"native"},
		Templates: []string{"base"},
	}
	meta.SetStatusCondition(&wn.Status.Conditions, metav1.Condition{Type: warrenv1.NodeReady, Status: metav1.ConditionTrue, Reason: "Serving", Message: "test"})
	if err := c.Status().Update(ctx, wn); err != nil {
		t.Fatal(err)
	}
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: fleet.LeaseName(n.name), Namespace: testNS},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(n.name), LeaseDurationSeconds: ptr.To(int32(3600)), RenewTime: &now},
	}
	if err := c.Create(ctx, lease); err != nil {
		t.Fatal(err)
	}
}

// gateway starts a gateway on namespace ns and returns it with the
// fleet's admin key it made.
func (f *fleetTest) gateway(ctx context.Context, ns string) (*httptest.Server, string) {
	t := f.t
	t.Helper()
	cfg := Config{Listen: "127.0.0.1:0", Namespace: ns, Domain: "sb.test", PlacementSample: 3, GatewayID: "test"}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	g, err := New(ctx, cfg, f.env.Config, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	var sec corev1.Secret
	if err := f.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: fleet.FleetAdminSecret}, &sec); err != nil {
		t.Fatalf("the gateway did not make the fleet's admin key: %v", err)
	}
	key := string(sec.Data[fleet.KeyDataKey])
	if string(sec.Data[fleet.KeyDataHash]) != store.HashKey(key) || string(sec.Data[fleet.KeyDataTeam]) != fleet.AdminTeam {
		t.Fatalf("fleet admin Secret is malformed: %v", sec.Data)
	}
	return srv, key
}

// call sends a request through a gateway.
func (f *fleetTest) call(srv *httptest.Server, method, path, key string, body any, hdr ...string) (*http.Response, []byte) {
	f.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(f.t.Context(), method, srv.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res, out
}

// eventually retries check until it passes (the watch cache lags writes).
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (f *fleetTest) createThenMemo(t *testing.T) {
	res, body := f.call(f.gw, "POST", "/sandboxes", f.admin, wapi.NewSandbox{TemplateID: "base"})
	if res.StatusCode != http.StatusCreated || res.Header.Get("X-Stub-Node") != "a" {
		t.Fatalf("create: %d from %q: %s", res.StatusCode, res.Header.Get("X-Stub-Node"), body)
	}
	var sb wapi.Sandbox
	if err := json.Unmarshal(body, &sb); err != nil || sb.SandboxID != "asb1" || sb.TemplateID != "base" {
		t.Fatalf("create's answer %s (%v): the body did not reach the node whole", body, err)
	}
	// No Sandbox object and no probe: the memo knows. The stub answers
	// the path itself, so a probe would show as a GET /sandboxes/asb1.
	before := len(f.a.requests())
	res, body = f.call(f.gw, "POST", "/v2/sandboxes/asb1/connect", f.admin, map[string]int{"timeout": 60})
	if res.StatusCode != http.StatusOK || string(body) != "POST /v2/sandboxes/asb1/connect" {
		t.Fatalf("connect: %d %s", res.StatusCode, body)
	}
	if got := f.a.requests()[before:]; len(got) != 1 {
		t.Fatalf("node a saw %v: want the one forwarded call, no probe", got)
	}
	// A fork is made on its parent's node, and memoised from the answer.
	res, body = f.call(f.gw, "POST", "/sandboxes/asb1/fork", f.admin, wapi.NewSandbox{TemplateID: "base"})
	if res.StatusCode != http.StatusCreated || json.Unmarshal(body, &sb) != nil || sb.SandboxID != "asb2" {
		t.Fatalf("fork: %d %s", res.StatusCode, body)
	}
	// A fork of no sandbox at all is a 400 for its count, before any node
	// is asked where the sandbox is.
	beforeA, beforeB := len(f.a.requests()), len(f.b.requests())
	for _, path := range []string{"/sandboxes/nosuchsb/fork", "/sandboxes/asb1/fork"} {
		res, body = f.call(f.gw, "POST", path, f.admin, map[string]int{"count": 0})
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "count 0") ||
			len(f.a.requests()) != beforeA || len(f.b.requests()) != beforeB {
			t.Fatalf("fork %s with count 0: %d %s", path, res.StatusCode, body)
		}
	}
	res, body = f.call(f.gw, "POST", "/sandboxes/asb2/pause", f.admin, nil)
	if res.StatusCode != http.StatusOK || string(body) != "POST /sandboxes/asb2/pause" || len(f.a.requests()) != beforeA+1 || len(f.b.requests()) != beforeB {
		t.Fatalf("the fork's next call: %d %s; a saw %v, b %v", res.StatusCode, body, f.a.requests()[beforeA:], f.b.requests()[beforeB:])
	}
}

func (f *fleetTest) routedByCache(t *testing.T) {
	ctx, c := t.Context(), f.env.Client
	// b does not list "cachedsb", so only the Sandbox object can route it.
	sb := &warrenv1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: "cachedsb", Namespace: testNS, Labels: map[string]string{
			fleet.LabelSandboxID: "cachedsb", fleet.LabelNode: "b", fleet.LabelOrigin: fleet.OriginAPI,
		}},
		Spec: warrenv1.SandboxSpec{Template: "base"},
	}
	if err := c.Create(ctx, sb); err != nil {
		t.Fatal(err)
	}
	sb.Status = warrenv1.SandboxStatus{Phase: warrenv1.SandboxRunning, Node: "b", SandboxID: "cachedsb"}
	if err := c.Status().Update(ctx, sb); err != nil {
		t.Fatal(err)
	}
	eventually(t, "routing by the Sandbox object", func() error {
		res, body := f.call(f.gw, "GET", "/sandboxes/cachedsb/logs", f.admin, nil)
		if res.Header.Get("X-Stub-Node") != "b" {
			return &routeErr{res.StatusCode, body}
		}
		return nil
	})
}

type routeErr struct {
	status int
	body   []byte
}

func (e *routeErr) Error() string { return http.StatusText(e.status) + ": " + string(e.body) }

func (f *fleetTest) routedByProbe(t *testing.T) {
	f.b.hold("probedsb", time.Now())
	res, body := f.call(f.gw, "DELETE", "/sandboxes/probedsb", f.admin, nil)
	if res.StatusCode != http.StatusOK || res.Header.Get("X-Stub-Node") != "b" || string(body) != "DELETE /sandboxes/probedsb" {
		t.Fatalf("probe: %d from %q: %s", res.StatusCode, res.Header.Get("X-Stub-Node"), body)
	}
	// Memoised: the next call asks no node first.
	before := len(f.a.requests())
	f.call(f.gw, "GET", "/sandboxes/probedsb/files?path=/x", f.admin, nil)
	if got := f.a.requests()[before:]; len(got) != 0 {
		t.Fatalf("node a was asked %v after the probe found b", got)
	}
}

// memoDenied: a sandbox that moved from a to b through another gateway:
// this gateway's memo still says a, whose 404 drops the entry, and the
// next call finds b.
func (f *fleetTest) memoDenied(t *testing.T) {
	f.a.hold("movedsb", time.Now())
	if res, body := f.call(f.gw, "GET", "/sandboxes/movedsb", f.admin, nil); res.Header.Get("X-Stub-Node") != "a" {
		t.Fatalf("before the move: %d from %q: %s", res.StatusCode, res.Header.Get("X-Stub-Node"), body)
	}
	f.a.drop("movedsb")
	f.b.hold("movedsb", time.Now())
	if res, _ := f.call(f.gw, "GET", "/sandboxes/movedsb", f.admin, nil); res.StatusCode != http.StatusNotFound || res.Header.Get("X-Stub-Node") != "a" {
		t.Fatalf("the memo's node right after the move: %d from %q, want a's 404", res.StatusCode, res.Header.Get("X-Stub-Node"))
	}
	if res, body := f.call(f.gw, "GET", "/sandboxes/movedsb", f.admin, nil); res.StatusCode != http.StatusOK || res.Header.Get("X-Stub-Node") != "b" {
		t.Fatalf("after a's 404: %d from %q: %s, want b", res.StatusCode, res.Header.Get("X-Stub-Node"), body)
	}
}

func (f *fleetTest) plane(t *testing.T) {
	// No API key: the sandbox's access token is the node's to check.
	res, body := f.call(f.gw, "POST", "/process.Process/Start", "", nil, "E2b-Sandbox-Id", "asb1", "X-Access-Token", "tok")
	if res.StatusCode != http.StatusOK || string(body) != "plane asb1" || res.Header.Get("X-Stub-Node") != "a" {
		t.Fatalf("plane by header: %d %s", res.StatusCode, body)
	}
	res, body = f.call(f.gw, "GET", "/files?path=/x", "", nil, "Host", "49983-asb1.sb.test", "X-Access-Token", "tok")
	if res.StatusCode != http.StatusOK || string(body) != "plane asb1" {
		t.Fatalf("plane by Host: %d %s", res.StatusCode, body)
	}
	// A sandbox of another team, neither memoised nor in the cache: the
	// credential-less plane probe finds it.
	f.b.hold("planesb", time.Now())
	res, body = f.call(f.gw, "POST", "/process.Process/Start", "", nil, "E2b-Sandbox-Id", "planesb", "X-Access-Token", "tok")
	if res.StatusCode != http.StatusOK || string(body) != "plane planesb" || res.Header.Get("X-Stub-Node") != "b" {
		t.Fatalf("plane by probe: %d %s", res.StatusCode, body)
	}
	// A sandbox no node holds: E2B's proxy's answer, as the node gives it.
	res, body = f.call(f.gw, "GET", "/files?path=/x", "", nil, "E2b-Sandbox-Id", "gonesb", "X-Access-Token", "tok")
	if res.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), `{"code":502,"message":"The sandbox was not found","sandboxId":"gonesb"}`) {
		t.Fatalf("plane for a missing sandbox: %d %s", res.StatusCode, body)
	}
	res, body = f.call(f.gw, "POST", "/process.Process/List", "", struct{}{}, "E2b-Sandbox-Id", "gonesb", "Content-Type", "application/json")
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"code":"unavailable"`) {
		t.Fatalf("Connect RPC for a missing sandbox: %d %s", res.StatusCode, body)
	}
}

func (f *fleetTest) unknown(t *testing.T) {
	res, body := f.call(f.gw, "GET", "/sandboxes/nosuch", f.admin, nil)
	var e wapi.Error
	if res.StatusCode != http.StatusNotFound || json.Unmarshal(body, &e) != nil || e.Code != 404 || !strings.Contains(e.Message, "nosuch") {
		t.Fatalf("unknown sandbox: %d %s", res.StatusCode, body)
	}
}

func (f *fleetTest) listPaged(t *testing.T) {
	base := time.Now().Add(-time.Hour)
	for i, id := range []string{"p1", "p2", "p3", "p4", "p5", "p6", "p7"} {
		n := f.a
		if i%3 == 1 {
			n = f.b
		}
		n.hold(id, base.Add(time.Duration(i)*time.Millisecond))
	}
	got := f.pageAll(t, "/sandboxes?limit=3&order=asc", nil)
	// p1..p7 first (oldest), then the sandboxes the earlier steps made.
	if want := []string{"p1", "p2", "p3", "p4", "p5", "p6", "p7"}; len(got) < 7 || !slices.Equal(got[:7], want) {
		t.Fatalf("paged list %v: want %v first", got, want)
	}
	if !slices.Contains(got, "asb1") || !slices.Contains(got, "probedsb") || len(got) != 12 {
		t.Fatalf("paged list %v: want every sandbox of both nodes once", got)
	}
	// Newest first, E2B's default: the same twelve the other way round,
	// while between pages a sandbox starts (after the walk's position: not
	// listed) and one not yet listed goes.
	between := func(page int) {
		if page == 0 {
			f.b.hold("latest", time.Now().Add(time.Hour))
			f.a.mu.Lock()
			delete(f.a.sandboxes, "p1")
			f.a.mu.Unlock()
		}
	}
	desc := f.pageAll(t, "/v2/sandboxes?limit=3", between)
	want := slices.Clone(got)
	slices.Reverse(want)
	want = slices.DeleteFunc(want, func(id string) bool { return id == "p1" })
	if !slices.Equal(desc, want) {
		t.Fatalf("newest first %v: want %v", desc, want)
	}
	for _, bad := range []string{"nextToken=p3", "order=newest"} {
		if res, _ := f.call(f.gw, "GET", "/sandboxes?"+bad, f.admin, nil); res.StatusCode != http.StatusBadRequest {
			t.Fatalf("%s: %d, want 400", bad, res.StatusCode)
		}
	}
}

// pageAll follows a list's X-Next-Token to its end and returns the ids it
// listed; between, if set, runs after each page.
func (f *fleetTest) pageAll(t *testing.T, path string, between func(page int)) []string {
	t.Helper()
	var got []string
	tok := ""
	for pages := 0; pages < 20; pages++ {
		p := path
		if tok != "" {
			p += "&nextToken=" + url.QueryEscape(tok)
		}
		res, body := f.call(f.gw, "GET", p, f.admin, nil)
		var page []wapi.SandboxDetail
		if res.StatusCode != http.StatusOK || json.Unmarshal(body, &page) != nil || len(page) > 3 {
			t.Fatalf("list %s: %d %s", p, res.StatusCode, body)
		}
		for _, sb := range page {
			got = append(got, sb.SandboxID)
		}
		if tok = res.Header.Get("X-Next-Token"); tok == "" {
			return got
		}
		if between != nil {
			between(pages)
		}
	}
	t.Fatalf("list %s: paging does not end: %v", path, got)
	return nil
}

func (f *fleetTest) streams(t *testing.T) {
	req, _ := http.NewRequestWithContext(t.Context(), "GET", f.gw.URL+"/sandboxes/asb1/stream", nil)
	req.Header.Set("X-API-Key", f.admin)
	res, err := f.gw.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case l := <-lines:
		if l != "first" {
			t.Fatalf("first chunk %q", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first chunk did not come through before the second was written: the proxy buffers")
	}
	close(f.a.release)
	if l := <-lines; l != "second" {
		t.Fatalf("second chunk %q", l)
	}
}

func (f *fleetTest) upgrade(t *testing.T) {
	conn, err := net.Dial("tcp", strings.TrimPrefix(f.gw.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET /sandboxes/probedsb/ports/8080/connect HTTP/1.1\r\nHost: gw\r\nX-API-Key: %s\r\nConnection: Upgrade\r\nUpgrade: warren-tcp\r\n\r\n", f.admin)
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade through the gateway: %v %v", res, err)
	}
	for _, msg := range []string{"ping", "pong"} {
		if _, err := io.WriteString(conn, msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len("b:")+len(msg))
		if _, err := io.ReadFull(br, got); err != nil || string(got) != "b:"+msg {
			t.Fatalf("raw bytes through the upgraded connection: %q, %v", got, err)
		}
	}
}

func (f *fleetTest) apiKeys(t *testing.T) {
	res, body := f.call(f.gw, "POST", "/api-keys", f.admin, wapi.NewAPIKey{Team: "t1", Name: "ci"})
	var k wapi.APIKey
	if res.StatusCode != http.StatusCreated || json.Unmarshal(body, &k) != nil || k.Key == "" || k.Team != "t1" || k.Name != "ci" || !strings.HasPrefix(k.Key, k.Prefix) {
		t.Fatalf("create key: %d %s", res.StatusCode, body)
	}
	var sec corev1.Secret
	if err := f.env.Client.Get(t.Context(), client.ObjectKey{Namespace: testNS, Name: k.ID}, &sec); err != nil {
		t.Fatal(err)
	}
	if sec.Labels[fleet.LabelAPIKey] != "true" || string(sec.Data[fleet.KeyDataHash]) != store.HashKey(k.Key) ||
		string(sec.Data[fleet.KeyDataTeam]) != "t1" || string(sec.Data[fleet.KeyDataPrefix]) != k.Prefix || len(sec.Data[fleet.KeyDataKey]) != 0 {
		t.Fatalf("key Secret %v %v", sec.Labels, sec.Data)
	}
	eventually(t, "the new key authenticates", func() error {
		if res, body := f.call(f.gw, "GET", "/sandboxes", k.Key, nil); res.StatusCode != http.StatusOK {
			return &routeErr{res.StatusCode, body}
		}
		return nil
	})
	if res, _ := f.call(f.gw, "GET", "/api-keys", k.Key, nil); res.StatusCode != http.StatusForbidden {
		t.Fatalf("a team key listed keys: %d", res.StatusCode)
	}
	if res, _ := f.call(f.gw, "GET", "/sandboxes", "e2b_00000000000000000000000000000000", nil); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an unknown key: %d", res.StatusCode)
	}
	res, body = f.call(f.gw, "GET", "/api-keys?team=t1", f.admin, nil)
	var keys []wapi.APIKey
	if res.StatusCode != http.StatusOK || json.Unmarshal(body, &keys) != nil || len(keys) != 1 || keys[0].ID != k.ID || keys[0].Key != "" {
		t.Fatalf("list keys: %d %s", res.StatusCode, body)
	}
	if res, body := f.call(f.gw, "DELETE", "/api-keys/"+k.ID, f.admin, nil); res.StatusCode != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", res.StatusCode, body)
	}
	eventually(t, "the revoked key is refused", func() error {
		if res, body := f.call(f.gw, "GET", "/sandboxes", k.Key, nil); res.StatusCode != http.StatusUnauthorized {
			return &routeErr{res.StatusCode, body}
		}
		return nil
	})
}

func (f *fleetTest) ownerDown(t *testing.T) {
	// Node c is Ready and live but its endpoint refuses connections.
	c := newStubNode(t, "c")
	c.hold("downsb", time.Now())
	f.register(c, 1<<30, 1<<30) // least free memory: creates stay off it
	eventually(t, "node c routed to", func() error {
		if res, body := f.call(f.gw, "GET", "/sandboxes/downsb", f.admin, nil); res.StatusCode != http.StatusOK {
			return &routeErr{res.StatusCode, body}
		}
		return nil
	})
	c.srv.Close()
	res, body := f.call(f.gw, "GET", "/sandboxes/downsb/logs", f.admin, nil)
	var e wapi.Error
	if res.StatusCode != http.StatusBadGateway || json.Unmarshal(body, &e) != nil || e.Code != 502 || !strings.Contains(e.Message, "node c") {
		t.Fatalf("owner down: %d %s", res.StatusCode, body)
	}
}

func (f *fleetTest) noReadyNode(t *testing.T) {
	// Another namespace holds no Lease: the same nodes are not live there.
	f.namespace("empty")
	gw, admin := f.gateway(t.Context(), "empty")
	for _, c := range []struct{ method, path string }{{"POST", "/sandboxes"}, {"GET", "/sandboxes"}, {"GET", "/sandboxes/asb1"}} {
		res, body := f.call(gw, c.method, c.path, admin, wapi.NewSandbox{})
		var e wapi.Error
		if res.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(body, &e) != nil || e.Code != 503 {
			t.Errorf("%s %s with no Ready node: %d %s", c.method, c.path, res.StatusCode, body)
		}
	}
	res, body := f.call(gw, "GET", "/health", "", nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"status":"unavailable","gatewayId":"test","nodesReady":0,"nodesTotal":3`) {
		t.Errorf("health: %d %s", res.StatusCode, body)
	}
}

func (f *fleetTest) runAndStop(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	writeKubeconfig(t, f.env.Config, kubeconfig)
	f.namespace("run")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	cfg := DefaultConfig()
	cfg.Listen, cfg.Kubeconfig, cfg.Namespace = addr, kubeconfig, "run"
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	eventually(t, "the gateway serves /health", func() error {
		res, err := http.Get("http://" + addr + "/health")
		if err != nil {
			return err
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		// This namespace has no Leases: serving, but no node is Ready.
		if !strings.Contains(string(body), `"nodesReady":0`) {
			return &routeErr{res.StatusCode, body}
		}
		return nil
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel: %v", err)
		}
	case <-time.After(shutdownGrace + 5*time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if _, err := http.Get("http://" + addr + "/health"); err == nil {
		t.Fatal("still serving after Run returned")
	}
}

// writeKubeconfig writes a kubeconfig file reaching the control plane as
// rc does.
func writeKubeconfig(t *testing.T, rc *rest.Config, path string) {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData}
	cfg.AuthInfos["test"] = &clientcmdapi.AuthInfo{ClientCertificateData: rc.CertData, ClientKeyData: rc.KeyData, Token: rc.BearerToken}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	cfg.CurrentContext = "test"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
}
