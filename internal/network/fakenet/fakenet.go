// Package fakenet builds a fake internet out of network namespaces on this
// machine, for tests and benchmarks of sandbox networking that must never
// send a packet off it.
//
// Two throwaway namespaces stand in for "the host" (where warren's network
// manager works, given as its namespace) and for "the internet" (servers on
// documentation addresses), joined by a veth pair:
//
//	host netns: uplink0 192.0.2.1/24, default via 192.0.2.2, a TCP server on :3000
//	upstream netns: eth0 192.0.2.2/24; on lo 198.51.100.10, .20, .30, 10.1.2.3,
//	  169.254.169.254 with HTTP on :80, greet-and-echo on :81, a sized
//	  download on :9000; DNS on 203.0.113.53:53 answering Records
//
// Every packet a sandbox on the fake host sends stays inside these
// namespaces: the host's only route out is the upstream namespace, which
// routes nowhere. Close removes the namespaces, and with them everything
// made inside them (bridges, veths, nftables tables).
package fakenet

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/nftables"
	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/mountinfo"
)

// Addresses of the fake internet.
const (
	UpstreamDNS  = "203.0.113.53"
	HostUplink   = "192.0.2.1"
	UpstreamAddr = "192.0.2.2"
	UplinkName   = "uplink0"
	// HostPort is where a server listens on the fake host (its "API port").
	HostPort = 3000
	// Ports of the upstream servers.
	HTTPPort     = 80
	EchoPort     = 81
	DownloadPort = 9000
)

// Servers are the upstream's server addresses (public documentation space).
var Servers = []string{"198.51.100.10", "198.51.100.20", "198.51.100.30"}

// Private and metadata addresses the upstream also answers on: a sandbox
// must not reach them even when something routes them.
const (
	PrivateServer  = "10.1.2.3"
	MetadataServer = "169.254.169.254"
)

// Records are the names the upstream resolver knows (A records, TTL 300).
var Records = map[string]string{
	"allowed.example.":  "198.51.100.10",
	"denied.example.":   "198.51.100.20",
	"other.example.":    "198.51.100.30",
	"a.wild.example.":   "198.51.100.30",
	"rebind.example.":   PrivateServer,
	"metadata.example.": MetadataServer,
}

// Internet is one fake internet.
type Internet struct {
	// Dir holds the namespace mount points (Dir/ns/<name>).
	Dir string
	// HostNS and UpstreamNS are the namespaces' paths.
	HostNS, UpstreamNS string

	mu      sync.Mutex
	closers []io.Closer
	ns      []string
}

// New builds a fake internet with its namespaces under dir (which must
// exist). On error nothing is left.
func New(dir string) (_ *Internet, err error) {
	in := &Internet{Dir: dir}
	defer func() {
		if err != nil {
			err = errors.Join(err, in.Close())
		}
	}()
	if in.HostNS, err = in.NewNS("host"); err != nil {
		return nil, err
	}
	if in.UpstreamNS, err = in.NewNS("upstream"); err != nil {
		return nil, err
	}
	hostH, err := netns.GetFromPath(in.HostNS)
	if err != nil {
		return nil, err
	}
	defer hostH.Close()
	upH, err := netns.GetFromPath(in.UpstreamNS)
	if err != nil {
		return nil, err
	}
	defer upH.Close()
	hh, err := netlink.NewHandleAt(hostH)
	if err != nil {
		return nil, err
	}
	defer hh.Close()
	uh, err := netlink.NewHandleAt(upH)
	if err != nil {
		return nil, err
	}
	defer uh.Close()

	la := netlink.NewLinkAttrs()
	la.Name = UplinkName
	if err := hh.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "eth0", PeerNamespace: netlink.NsFd(upH)}); err != nil {
		return nil, fmt.Errorf("fakenet: uplink veth: %w", err)
	}
	if err := up(hh, "lo"); err != nil {
		return nil, err
	}
	if err := up(hh, UplinkName, HostUplink+"/24"); err != nil {
		return nil, err
	}
	if err := hh.RouteAdd(&netlink.Route{Gw: net.ParseIP(UpstreamAddr)}); err != nil {
		return nil, fmt.Errorf("fakenet: default route: %w", err)
	}
	loAddrs := []string{UpstreamDNS + "/32", PrivateServer + "/32", MetadataServer + "/32"}
	for _, a := range Servers {
		loAddrs = append(loAddrs, a+"/32")
	}
	if err := up(uh, "lo", loAddrs...); err != nil {
		return nil, err
	}
	if err := up(uh, "eth0", UpstreamAddr+"/24"); err != nil {
		return nil, err
	}

	for _, s := range []struct {
		ns   string
		addr string
		fn   func(net.Listener) io.Closer
	}{
		{in.UpstreamNS, fmt.Sprintf("0.0.0.0:%d", HTTPPort), serveHTTP},
		{in.UpstreamNS, fmt.Sprintf("0.0.0.0:%d", EchoPort), serveEcho},
		{in.UpstreamNS, fmt.Sprintf("0.0.0.0:%d", DownloadPort), serveDownload},
		{in.HostNS, fmt.Sprintf("0.0.0.0:%d", HostPort), serveEcho},
	} {
		if err := in.Listen(s.ns, s.addr, s.fn); err != nil {
			return nil, err
		}
	}
	if err := in.serveDNS(); err != nil {
		return nil, err
	}
	return in, nil
}

func up(h *netlink.Handle, name string, addrs ...string) error {
	l, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("fakenet: %s: %w", name, err)
	}
	for _, a := range addrs {
		addr, err := netlink.ParseAddr(a)
		if err != nil {
			return err
		}
		if err := h.AddrAdd(l, addr); err != nil {
			return fmt.Errorf("fakenet: address %s on %s: %w", a, name, err)
		}
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("fakenet: bring up %s: %w", name, err)
	}
	return nil
}

// NewNS makes another namespace of this internet (Dir/ns/name), removed by
// Close.
func (in *Internet) NewNS(name string) (string, error) {
	if err := os.MkdirAll(filepath.Join(in.Dir, "ns"), 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(in.Dir, "ns", name)
	if err := CreateNS(path); err != nil {
		return "", err
	}
	in.mu.Lock()
	in.ns = append(in.ns, path)
	in.mu.Unlock()
	return path, nil
}

// Listen runs serve on a TCP listener made inside the namespace at nsPath;
// Close stops it.
func (in *Internet) Listen(nsPath, addr string, serve func(net.Listener) io.Closer) error {
	var ln net.Listener
	if err := InNS(nsPath, func() (err error) {
		ln, err = net.Listen("tcp4", addr)
		return err
	}); err != nil {
		return fmt.Errorf("fakenet: listen on %s in %s: %w", addr, filepath.Base(nsPath), err)
	}
	c := serve(ln)
	in.mu.Lock()
	in.closers = append(in.closers, c)
	in.mu.Unlock()
	return nil
}

// Close stops the servers, unmounts everything under Dir (the namespaces,
// and whatever a test left mounted there) and removes the mount points.
func (in *Internet) Close() error {
	in.mu.Lock()
	closers, nss := in.closers, in.ns
	in.closers, in.ns = nil, nil
	in.mu.Unlock()
	var errs []error
	for _, c := range closers {
		if err := c.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for i := len(nss) - 1; i >= 0; i-- {
		errs = append(errs, RemoveNS(nss[i]))
	}
	return errors.Join(errs...)
}

// UnmountUnder unmounts every mount at or below dir, deepest first (a
// network run directory a daemon under test left: its namespace mounts and
// the shared mount of the directory itself).
func UnmountUnder(dir string) error { return mountinfo.DetachUnder(dir, false) }

// CreateNS makes a network namespace and bind-mounts it at path (which must
// not exist).
func CreateNS(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return fmt.Errorf("fakenet: create netns mount point: %w", err)
	}
	f.Close()
	err = onThread(func() (bool, error) {
		orig, err := netns.Get()
		if err != nil {
			return true, err
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return true, fmt.Errorf("fakenet: unshare netns: %w", err)
		}
		merr := unix.Mount("/proc/thread-self/ns/net", path, "", unix.MS_BIND, "")
		if err := netns.Set(orig); err != nil {
			return false, errors.Join(merr, err)
		}
		return true, merr
	})
	if err != nil {
		_ = RemoveNS(path)
		return err
	}
	return nil
}

// RemoveNS unmounts and removes a namespace mount point; a missing one is
// not an error.
func RemoveNS(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// InNS runs fn on an OS thread inside the namespace at path: sockets fn
// opens belong to it. A socket keeps its namespace, so fn may hand it to
// other goroutines.
func InNS(path string, fn func() error) error {
	h, err := netns.GetFromPath(path)
	if err != nil {
		return err
	}
	defer h.Close()
	return onThread(func() (bool, error) {
		orig, err := netns.Get()
		if err != nil {
			return true, err
		}
		defer orig.Close()
		if err := netns.Set(h); err != nil {
			return true, err
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			// Leave the thread locked: the runtime discards it.
			return false, errors.Join(ferr, err)
		}
		return true, ferr
	})
}

func onThread(fn func() (restored bool, err error)) error {
	errc := make(chan error, 1)
	go func() {
		goruntime.LockOSThread()
		restored, err := fn()
		if restored {
			goruntime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// serveEcho greets every connection with "hello from <local address>\n",
// then echoes what it reads.
func serveEcho(ln net.Listener) io.Closer {
	return acceptLoop(ln, func(c net.Conn) {
		fmt.Fprintf(c, "hello from %s\n", c.LocalAddr().(*net.TCPAddr).IP)
		_, _ = io.Copy(c, c)
	})
}

// serveDownload reads a byte count (a decimal line) and sends that many
// bytes.
func serveDownload(ln net.Listener) io.Closer {
	return acceptLoop(ln, func(c net.Conn) {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReader(io.LimitReader(c, 32)).ReadString('\n')
		if err != nil {
			return
		}
		n, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
		if err != nil || n < 0 {
			return
		}
		_ = c.SetReadDeadline(time.Time{})
		buf := make([]byte, 256<<10)
		for n > 0 {
			w, err := c.Write(buf[:min(int64(len(buf)), n)])
			if err != nil {
				return
			}
			n -= int64(w)
		}
	})
}

// ServeDownload serves sized downloads (see the download port) on addr in
// the namespace at nsPath, e.g. for a baseline between plain namespaces.
func (in *Internet) ServeDownload(nsPath, addr string) error {
	return in.Listen(nsPath, addr, serveDownload)
}

func acceptLoop(ln net.Listener, handle func(net.Conn)) io.Closer {
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
					c.Close()
				}()
				handle(c)
			}()
		}
	}()
	return closerFunc(func() error {
		err := ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
		return err
	})
}

// serveHTTP answers every request with "hello from <local address>\n".
func serveHTTP(ln net.Listener) io.Closer {
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			addr, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
			ip := ""
			if ta, ok := addr.(*net.TCPAddr); ok {
				ip = ta.IP.String()
			}
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprintf(w, "hello from %s\n", ip)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.Serve(ln) }()
	return closerFunc(srv.Close)
}

func (in *Internet) serveDNS() error {
	var pc net.PacketConn
	if err := InNS(in.UpstreamNS, func() (err error) {
		pc, err = net.ListenPacket("udp4", UpstreamDNS+":53")
		return err
	}); err != nil {
		return fmt.Errorf("fakenet: dns: %w", err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg).SetReply(req)
		if len(req.Question) == 0 {
			_ = w.WriteMsg(m)
			return
		}
		q := req.Question[0]
		a, ok := Records[strings.ToLower(q.Name)]
		switch {
		case !ok:
			m.Rcode = dns.RcodeNameError
		case q.Qtype == dns.TypeA:
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.ParseIP(a)})
		}
		_ = w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	in.mu.Lock()
	in.closers = append(in.closers, closerFunc(srv.Shutdown))
	in.mu.Unlock()
	return nil
}

// Counts is what warren's network has made on the fake host, for leak
// checks: host-side veths, namespace mounts in its run directory, and
// per-sandbox nftables chains, sets and map elements in its table.
type Counts struct {
	Veths, Mounts, Chains, Sets, MapElems int
}

// Count reads what warren's network (run directory runDir) has on the fake
// host. The names are internal/network's defaults: veths wrn*, table inet
// warren, chains and sets sb_*, the map "sandboxes".
func (in *Internet) Count(runDir string) (Counts, error) {
	return in.CountNamed(runDir, "warren", "wrn")
}

// CountNamed is Count for a daemon given its own nftables table and veth
// prefix (several daemons on one fake host).
func (in *Internet) CountNamed(runDir, tableName, vethPrefix string) (Counts, error) {
	var c Counts
	h, err := netns.GetFromPath(in.HostNS)
	if err != nil {
		return c, err
	}
	defer h.Close()
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		return c, err
	}
	defer nl.Close()
	links, err := nl.LinkList()
	if err != nil {
		return c, err
	}
	for _, l := range links {
		if name := l.Attrs().Name; strings.HasPrefix(name, vethPrefix) && len(name) == len(vethPrefix)+12 {
			c.Veths++
		}
	}
	mounts, err := mountinfo.Under(filepath.Join(runDir, "netns"))
	if err != nil {
		return c, err
	}
	for _, m := range mounts {
		if m != filepath.Join(runDir, "netns") {
			c.Mounts++
		}
	}
	conn, err := nftables.New(nftables.WithNetNSFd(int(h)))
	if err != nil {
		return c, err
	}
	chains, err := conn.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return c, err
	}
	for _, ch := range chains {
		if ch.Table.Name == tableName && strings.HasPrefix(ch.Name, "sb_") {
			c.Chains++
		}
	}
	table := &nftables.Table{Name: tableName, Family: nftables.TableFamilyINet}
	sets, err := conn.GetSets(table)
	if err != nil {
		// No table: nothing of warren's.
		return c, nil
	}
	for _, s := range sets {
		if strings.HasPrefix(s.Name, "sb_") {
			c.Sets++
		}
		if s.Name == "sandboxes" {
			elems, err := conn.GetSetElements(s)
			if err != nil {
				return c, err
			}
			c.MapElems = len(elems)
		}
	}
	return c, nil
}
