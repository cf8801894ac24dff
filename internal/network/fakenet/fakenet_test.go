package fakenet

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/warrenhq/warren/internal/testutil"
)

// The fake internet answers from its host namespace and leaves nothing
// behind.
func TestFakeInternet(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	in, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	err = InNS(in.HostNS, func() error {
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
