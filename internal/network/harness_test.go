package network

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/mountinfo"
	"github.com/warrenhq/warren/internal/testutil"
)

// The fake internet. Nothing here touches the real host's network: two
// throwaway namespaces stand in for "the host" (where the Manager works,
// through Options.NetNS) and for "the internet" (servers on documentation
// addresses), joined by a veth pair. Every packet stays on this machine,
// and deleting the two namespaces removes all of it.
//
//	sandbox netns ── veth ── warren0 (10.87.0.1/24) ┐
//	                                  host-under-test│ uplink0 192.0.2.1/24 ── eth0 192.0.2.2/24  upstream netns
//	                                  default via 192.0.2.2                     lo: 198.51.100.10, .20, .30 (HTTP-ish on :80)
//	                                  a server on :3000 (the "API port")        203.0.113.53 (DNS), 10.1.2.3, 169.254.169.254
const (
	upstreamDNS = "203.0.113.53"
	hostUplink  = "192.0.2.1"
	testSubnet  = "10.87.0.0/24"
	apiPort     = 3000
)

var upstreamAddrs = []string{"198.51.100.10", "198.51.100.20", "198.51.100.30", upstreamDNS, "10.1.2.3", "169.254.169.254"}

// dnsRecords are the names the fake upstream resolver knows.
var dnsRecords = map[string]string{
	"allowed.example.":   "198.51.100.10",
	"denied.example.":    "198.51.100.20",
	"other.example.":     "198.51.100.30",
	"a.wild.example.":    "198.51.100.30",
	"rebind.example.":    "10.1.2.3",
	"metadata.example.":  "169.254.169.254",
	"short-ttl.example.": "198.51.100.30",
}

type fakeInternet struct {
	dir     string
	hostNS  string // path of the host-under-test namespace
	upNS    string
	runDir  string
	hostH   netns.NsHandle
	opts    Options
	closers []io.Closer
}

func newFakeInternet(t testing.TB) *fakeInternet {
	t.Helper()
	testutil.RequireRoot(t)
	dir := t.TempDir()
	f := &fakeInternet{dir: dir, runDir: filepath.Join(dir, "run")}
	// Whatever a failing test left mounted under the run directory goes
	// before the temporary directory does (cleanups run last-first).
	t.Cleanup(func() { unmountUnder(t, f.runDir) })
	f.hostNS = f.makeNS(t, "host-under-test")
	f.upNS = f.makeNS(t, "upstream")

	hostH := openNS(t, f.hostNS)
	f.hostH = hostH
	upH := openNS(t, f.upNS)
	hh, err := netlink.NewHandleAt(hostH)
	must(t, err)
	defer hh.Close()
	uh, err := netlink.NewHandleAt(upH)
	must(t, err)
	defer uh.Close()

	la := netlink.NewLinkAttrs()
	la.Name = "uplink0"
	must(t, hh.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "eth0", PeerNamespace: netlink.NsFd(upH)}))
	up := func(h *netlink.Handle, name string, addrs ...string) netlink.Link {
		l, err := h.LinkByName(name)
		must(t, err)
		for _, a := range addrs {
			addr, err := netlink.ParseAddr(a)
			must(t, err)
			must(t, h.AddrAdd(l, addr))
		}
		must(t, h.LinkSetUp(l))
		return l
	}
	up(hh, "lo")
	up(hh, "uplink0", hostUplink+"/24")
	must(t, hh.RouteAdd(&netlink.Route{Gw: net.ParseIP("192.0.2.2")}))
	var loAddrs []string
	for _, a := range upstreamAddrs {
		loAddrs = append(loAddrs, a+"/32")
	}
	up(uh, "lo", loAddrs...)
	up(uh, "eth0", "192.0.2.2/24")

	// The internet's servers, and one on the host ("the API port").
	f.closers = append(f.closers, serveTCP(t, upH, "0.0.0.0:80"), serveTCP(t, hostH, fmt.Sprintf("0.0.0.0:%d", apiPort)))
	f.closers = append(f.closers, serveDNS(t, upH, upstreamDNS+":53"))
	t.Cleanup(func() {
		for _, c := range f.closers {
			c.Close()
		}
	})

	f.opts = Options{
		RunDir:   f.runDir,
		NetNS:    f.hostNS,
		Bridge:   "warren0",
		Subnet:   netip.MustParsePrefix(testSubnet),
		Uplink:   "uplink0",
		Upstream: upstreamDNS + ":53",
		Log:      testLogger(t),
	}
	return f
}

// makeNS creates a named namespace under the test's directory, removed when
// the test ends.
func (f *fakeInternet) makeNS(t testing.TB, name string) string {
	t.Helper()
	must(t, os.MkdirAll(filepath.Join(f.dir, "ns"), 0o755))
	path := filepath.Join(f.dir, "ns", name)
	h, err := createNetNS(path, nil)
	must(t, err)
	h.Close()
	t.Cleanup(func() {
		if err := removeNetNSMount(path); err != nil {
			t.Errorf("remove netns %s: %v", name, err)
		}
	})
	return path
}

// manager starts a Manager on the fake host; the test's end uninstalls it
// (or closes it, when the test already did).
func (f *fakeInternet) manager(t testing.TB) *Manager {
	t.Helper()
	m, err := New(f.opts)
	must(t, err)
	t.Cleanup(func() {
		if !m.closed {
			if err := m.Uninstall(context.Background()); err != nil {
				t.Errorf("uninstall: %v", err)
			}
		}
	})
	return m
}

func unmountUnder(t testing.TB, dir string) {
	mounts, err := mountinfo.Read()
	if err != nil {
		t.Errorf("read mounts: %v", err)
		return
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		if p := mounts[i].MountPoint; p == dir || strings.HasPrefix(p, dir+"/") {
			if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", p, err)
			}
		}
	}
}

func openNS(t testing.TB, path string) netns.NsHandle {
	t.Helper()
	h, err := netns.GetFromPath(path)
	must(t, err)
	t.Cleanup(func() { h.Close() })
	return h
}

// inNS runs fn on a thread inside the namespace at path.
func inNS(t testing.TB, path string, fn func() error) error {
	t.Helper()
	h, err := netns.GetFromPath(path)
	if err != nil {
		return err
	}
	defer h.Close()
	return inNetNS(h, fn)
}

// serveTCP answers every connection with "hello from <local address>\n" and
// then echoes what it reads.
func serveTCP(t testing.TB, ns netns.NsHandle, addr string) io.Closer {
	t.Helper()
	var ln net.Listener
	must(t, inNetNS(ns, func() (err error) {
		ln, err = net.Listen("tcp4", addr)
		return err
	}))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				fmt.Fprintf(c, "hello from %s\n", c.LocalAddr().(*net.TCPAddr).IP)
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return closerFunc(func() error {
		err := ln.Close()
		return err
	})
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

func serveDNS(t testing.TB, ns netns.NsHandle, addr string) io.Closer {
	t.Helper()
	var pc net.PacketConn
	must(t, inNetNS(ns, func() (err error) {
		pc, err = net.ListenPacket("udp4", addr)
		return err
	}))
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg).SetReply(req)
		q := req.Question[0]
		a, ok := dnsRecords[strings.ToLower(q.Name)]
		switch {
		case !ok:
			m.Rcode = dns.RcodeNameError
		case q.Qtype == dns.TypeA:
			ttl := uint32(300)
			if strings.HasPrefix(q.Name, "short-ttl") {
				ttl = 1
			}
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: net.ParseIP(a)})
		case q.Qtype == dns.TypeAAAA:
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: 300}, AAAA: net.ParseIP("2001:db8::10")})
		}
		_ = w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	return closerFunc(srv.Shutdown)
}

// dialFrom connects from inside a sandbox's namespace and reads the
// server's greeting. It returns the connection (to be closed by the caller)
// and the address the server says it is.
func dialFrom(t testing.TB, nsPath, addr string) (net.Conn, string, error) {
	t.Helper()
	var c net.Conn
	err := inNS(t, nsPath, func() (err error) {
		c, err = net.DialTimeout("tcp4", addr, 5*time.Second)
		return err
	})
	if err != nil {
		return nil, "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		c.Close()
		return nil, "", fmt.Errorf("read greeting: %w", err)
	}
	return c, strings.TrimPrefix(strings.TrimSpace(line), "hello from "), nil
}

// mustReach asserts that a sandbox connects to addr and reaches the server
// there (not something else answering).
func mustReach(t testing.TB, nsPath, addr string) {
	t.Helper()
	c, who, err := dialFrom(t, nsPath, addr)
	if err != nil {
		t.Fatalf("connect to %s: %v, want a connection", addr, err)
	}
	c.Close()
	host, _, _ := net.SplitHostPort(addr)
	if who != host {
		t.Fatalf("connect to %s reached %s", addr, who)
	}
}

// mustBeRefused asserts that the connection is refused at once by warren's
// filter (a TCP reset), not merely timing out.
func mustBeRefused(t testing.TB, nsPath, addr string) {
	t.Helper()
	c, who, err := dialFrom(t, nsPath, addr)
	if err == nil {
		c.Close()
		t.Fatalf("connect to %s reached %s, want it refused", addr, who)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("connect to %s: %v, want connection refused", addr, err)
	}
}

// resolve asks the sandbox's resolver (the gateway) from inside the sandbox.
func resolve(t testing.TB, att *Attachment, name string, qtype uint16) *dns.Msg {
	t.Helper()
	var resp *dns.Msg
	err := inNS(t, att.NetNSPath, func() (err error) {
		q := new(dns.Msg).SetQuestion(dns.Fqdn(name), qtype)
		q.SetEdns0(1232, false)
		c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
		resp, _, err = c.Exchange(q, netip.AddrPortFrom(att.Gateway, 53).String())
		return err
	})
	if err != nil {
		t.Fatalf("look up %s from the sandbox: %v", name, err)
	}
	return resp
}

func answerA(resp *dns.Msg) []string {
	var out []string
	for _, rr := range resp.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	return out
}

// waitEvent polls the audit until an event matching want shows up (NFLOG
// delivery is asynchronous).
func waitEvent(t testing.TB, m *Manager, id string, what string, want func(Event) bool) Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, e := range m.Events(id, 0, 100000) {
			if want(e) {
				return e
			}
		}
		if time.Now().After(deadline) {
			var got []string
			for _, e := range m.Events(id, 0, 100000) {
				got = append(got, fmt.Sprintf("%+v", e))
			}
			t.Fatalf("no audit event %s for %s; events:\n%s", what, id, strings.Join(got, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// counts is what warren has made in the fake host, for leak checks.
type counts struct {
	veths, mounts, nsFiles, chains, sets, mapElems int
}

func (f *fakeInternet) count(t testing.TB) counts {
	t.Helper()
	var c counts
	h, err := netlink.NewHandleAt(f.hostH)
	must(t, err)
	defer h.Close()
	links, err := h.LinkList()
	must(t, err)
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, DefaultVethPrefix) {
			c.veths++
		}
	}
	mounts, err := mountinfo.Read()
	must(t, err)
	nsDir := filepath.Join(f.runDir, "netns") + "/"
	for _, mt := range mounts {
		if strings.HasPrefix(mt.MountPoint, nsDir) {
			c.mounts++
		}
	}
	entries, _ := os.ReadDir(nsDir)
	c.nsFiles = len(entries)
	conn, err := nftables.New(nftables.WithNetNSFd(int(f.hostH)))
	must(t, err)
	table := &nftables.Table{Name: DefaultTable, Family: nftables.TableFamilyINet}
	chains, err := conn.ListChainsOfTableFamily(nftables.TableFamilyINet)
	must(t, err)
	for _, ch := range chains {
		if ch.Table.Name == DefaultTable && strings.HasPrefix(ch.Name, sbPrefix) {
			c.chains++
		}
	}
	sets, err := conn.GetSets(table)
	if err == nil {
		for _, s := range sets {
			if strings.HasPrefix(s.Name, sbPrefix) {
				c.sets++
			}
		}
		elems, err := conn.GetSetElements(&nftables.Set{Table: table, Name: mapSandboxes})
		if err == nil {
			c.mapElems = len(elems)
		}
	}
	return c
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
