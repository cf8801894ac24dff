package fakenet

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/warrenhq/warren/internal/testutil"
)

// newInternet builds a fake internet in a temporary directory, closed when
// the test ends.
func newInternet(t *testing.T) (*Internet, string) {
	t.Helper()
	testutil.RequireRoot(t)
	dir := t.TempDir()
	in, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	return in, dir
}

// The fake internet answers from its host namespace and leaves nothing
// behind.
func TestFakeInternet(t *testing.T) {
	in, dir := newInternet(t)
	err := InNS(in.HostNS, func() error {
		// Dial here, on this thread: a dial from another goroutine (an
		// http.Transport's) would leave from the real host's namespace.
		hc, err := net.DialTimeout("tcp4", fmt.Sprintf("%s:%d", Servers[1], HTTPPort), 5*time.Second)
		if err != nil {
			return err
		}
		defer hc.Close()
		req, _ := http.NewRequest(http.MethodGet, "http://"+Servers[1]+"/", nil)
		if err := req.Write(hc); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(hc), req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "hello from "+Servers[1]+"\n" {
			return fmt.Errorf("http: %s %q", resp.Status, body)
		}
		conn, err := net.DialTimeout("tcp4", fmt.Sprintf("%s:%d", Servers[0], DownloadPort), 5*time.Second)
		if err != nil {
			return err
		}
		defer conn.Close()
		fmt.Fprintln(conn, 1<<20)
		n, err := io.Copy(io.Discard, conn)
		if err != nil || n != 1<<20 {
			return fmt.Errorf("download: %d bytes, %v", n, err)
		}
		echo, err := net.DialTimeout("tcp4", fmt.Sprintf("%s:%d", Servers[2], EchoPort), 5*time.Second)
		if err != nil {
			return err
		}
		defer echo.Close()
		if line, _ := bufio.NewReader(echo).ReadString('\n'); strings.TrimSpace(line) != "hello from "+Servers[2] {
			return fmt.Errorf("echo greeting %q", line)
		}
		r, _, err := (&dns.Client{Timeout: 5 * time.Second}).Exchange(new(dns.Msg).SetQuestion("allowed.example.", dns.TypeA), UpstreamDNS+":53")
		if err != nil {
			return err
		}
		if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != Records["allowed.example."] {
			return fmt.Errorf("dns: %v", r.Answer)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir + "/ns"); len(entries) != 0 {
		t.Fatalf("left in %s/ns: %v", dir, entries)
	}
}

// PeerNamespaces counts a namespace on the far side of a host veth, keeps
// counting it once the veth is gone while something holds the namespace,
// and stops once it dies; this internet's own namespaces never count.
func TestPeerNamespaces(t *testing.T) {
	in, dir := newInternet(t)
	count := func() int {
		t.Helper()
		n, err := in.PeerNamespaces()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 0 {
		t.Fatalf("a fresh internet counts %d peer namespaces", n)
	}
	// Not in.NewNS: a namespace the internet does not know, as a sandbox's.
	peer := filepath.Join(dir, "peer")
	if err := CreateNS(peer); err != nil {
		t.Fatal(err)
	}
	defer RemoveNS(peer)
	hostH, err := netns.GetFromPath(in.HostNS)
	if err != nil {
		t.Fatal(err)
	}
	defer hostH.Close()
	peerH, err := netns.GetFromPath(peer)
	if err != nil {
		t.Fatal(err)
	}
	hh, err := netlink.NewHandleAt(hostH)
	if err != nil {
		t.Fatal(err)
	}
	defer hh.Close()
	la := netlink.NewLinkAttrs()
	la.Name = "wrntest"
	err = hh.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "eth0", PeerNamespace: netlink.NsFd(peerH)})
	peerH.Close()
	if err != nil {
		t.Fatal(err)
	}
	l, err := hh.LinkByName("wrntest")
	if err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("with a veth into a namespace: %d peer namespaces, want 1", n)
	}
	if err := hh.LinkDel(l); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("veth gone, namespace still mounted: %d peer namespaces, want 1", n)
	}
	if err := RemoveNS(peer); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for count() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the namespace died but still counts after 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
