package network

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// The resolver listens on the bridge's address (the sandboxes' gateway and
// nameserver). It knows which sandbox asks from the query's source address
// (sandboxes cannot change their address: they lack CAP_NET_ADMIN over the
// namespace, which the host's user namespace owns), answers only names that
// sandbox's policy allows, forwards those to the upstream resolver, and
// opens the IPv4 addresses of the answer in the sandbox's dns set for the
// records' TTL before replying, so the connection that follows the lookup
// is already allowed.

const (
	// dnsMinTimeout is the shortest time a resolved address stays open:
	// records with a TTL of a few seconds (or 0) would otherwise close before
	// a client that cached the answer a little longer than told connects.
	dnsMinTimeout = 30 * time.Second
	// dnsMaxTimeout caps very long TTLs.
	dnsMaxTimeout = 24 * time.Hour
	// maxNamesPerSandbox bounds the addresses a sandbox can have opened at
	// once through names (each is a kernel set element).
	maxNamesPerSandbox = 4096
	// maxInflight bounds concurrent upstream queries across all sandboxes.
	maxInflight     = 256
	upstreamTimeout = 4 * time.Second
)

type resolver struct {
	policy   resolverPolicy
	events   *events
	host     hostNamespace
	gateway  netip.Addr // where it listens
	upstream string
	log      *slog.Logger
	udp, tcp *dns.Server
	inflight chan struct{}
	wg       sync.WaitGroup
	closing  atomic.Bool
}

// resolverPolicy is what the resolver asks of the rules: whose policy a
// query falls under, and to open the addresses an allowed name resolved to.
type resolverPolicy interface {
	policyOf(addr netip.Addr) (string, *compiled)
	noteResolved(id, name string, es []dnsElem) error
}

// hostNamespace runs fn where the sockets it opens belong to the namespace
// the Manager serves.
type hostNamespace interface {
	inHostNS(fn func() error) error
}

// start binds UDP and TCP port 53 on the gateway inside the host namespace
// and serves until stop.
func (r *resolver) start() error {
	r.inflight = make(chan struct{}, maxInflight)
	bind := netip.AddrPortFrom(r.gateway, 53).String()
	var pc net.PacketConn
	var ln net.Listener
	err := r.host.inHostNS(func() error {
		var err error
		if pc, err = net.ListenPacket("udp4", bind); err != nil {
			return err
		}
		if ln, err = net.Listen("tcp4", bind); err != nil {
			pc.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("resolver: listen on %s: %w", bind, err)
	}
	r.udp = &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(r.serve)}
	r.tcp = &dns.Server{Listener: ln, Handler: dns.HandlerFunc(r.serve), ReadTimeout: 5 * time.Second}
	for _, s := range []*dns.Server{r.udp, r.tcp} {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			if err := s.ActivateAndServe(); err != nil && !r.closing.Load() {
				r.log.Error("resolver stopped", "err", err)
			}
		}()
		<-started
	}
	return nil
}

// stop shuts both servers down and waits for them.
func (r *resolver) stop() {
	r.closing.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = r.udp.ShutdownContext(ctx)
	_ = r.tcp.ShutdownContext(ctx)
	r.wg.Wait()
}

func (r *resolver) serve(w dns.ResponseWriter, req *dns.Msg) {
	reply := r.answer(w, req)
	if reply == nil {
		return
	}
	if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
		size := dns.MinMsgSize
		if opt := req.IsEdns0(); opt != nil {
			size = int(max(opt.UDPSize(), dns.MinMsgSize))
		}
		reply.Truncate(size)
	}
	_ = w.WriteMsg(reply)
}

func (r *resolver) answer(w dns.ResponseWriter, req *dns.Msg) *dns.Msg {
	src := addrOfNet(w.RemoteAddr())
	id, pol := r.policy.policyOf(src)
	if pol == nil {
		return new(dns.Msg).SetRcode(req, dns.RcodeRefused)
	}
	if req.Opcode != dns.OpcodeQuery || len(req.Question) != 1 {
		return new(dns.Msg).SetRcode(req, dns.RcodeNotImplemented)
	}
	q := req.Question[0]
	name := normalizeName(q.Name)
	allowed, reason := pol.nameVerdict(name)
	r.record(id, name, allowed, reason)
	if !allowed {
		return refuse(req)
	}
	if q.Qtype == dns.TypeAAAA {
		// IPv4 only: an empty answer makes clients use the A record
		// instead of trying an address they cannot reach.
		return new(dns.Msg).SetReply(req)
	}

	select {
	case r.inflight <- struct{}{}:
		defer func() { <-r.inflight }()
	default:
		return new(dns.Msg).SetRcode(req, dns.RcodeServerFailure)
	}
	resp, err := r.forward(req)
	if err != nil {
		r.log.Debug("resolver: upstream query failed", "sandbox", id, "name", name, "err", err)
		return new(dns.Msg).SetRcode(req, dns.RcodeServerFailure)
	}
	resp.Id = req.Id
	resp.Answer = withoutAAAA(resp.Answer)
	resp.Extra = withoutAAAA(resp.Extra)

	var opened []dnsElem
	for _, rr := range resp.Answer {
		if a, ok := rr.(*dns.A); ok {
			addr, ok := netip.AddrFromSlice(a.A.To4())
			if !ok {
				continue
			}
			ttl := time.Duration(a.Hdr.Ttl) * time.Second
			if ttl > dnsMaxTimeout {
				// Clients must not cache the answer past the address's
				// closing.
				a.Hdr.Ttl = uint32(dnsMaxTimeout / time.Second)
			}
			opened = append(opened, dnsElem{addr: addr, timeout: min(max(ttl, dnsMinTimeout), dnsMaxTimeout)})
		}
	}
	if len(opened) > 0 {
		if err := r.policy.noteResolved(id, name, opened); err != nil {
			// The addresses stay closed: say so rather than hand out an
			// answer the sandbox cannot use.
			r.log.Warn("resolver: open resolved addresses", "sandbox", id, "name", name, "err", err)
			return new(dns.Msg).SetRcode(req, dns.RcodeServerFailure)
		}
	}
	return resp
}

func (r *resolver) forward(req *dns.Msg) (*dns.Msg, error) {
	out := req.Copy()
	out.Id = dns.Id()
	ctx, cancel := context.WithTimeout(context.Background(), upstreamTimeout)
	defer cancel()
	c := &dns.Client{Net: "udp", Timeout: upstreamTimeout}
	resp, err := r.exchange(ctx, c, out)
	if err == nil && resp.Truncated {
		c.Net = "tcp"
		resp, err = r.exchange(ctx, c, out)
	}
	return resp, err
}

// exchange queries the upstream over a socket opened in the manager's
// namespace: the handler runs on whatever thread the Go runtime picks, which
// is in the daemon's namespace, not necessarily the one the manager serves.
func (r *resolver) exchange(ctx context.Context, c *dns.Client, m *dns.Msg) (*dns.Msg, error) {
	var conn net.Conn
	err := r.host.inHostNS(func() (err error) {
		conn, err = (&net.Dialer{Timeout: upstreamTimeout}).DialContext(ctx, c.Net, r.upstream)
		return err
	})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	resp, _, err := c.ExchangeWithConnContext(ctx, m, &dns.Conn{Conn: conn})
	return resp, err
}

// refuse answers a denied name with NXDOMAIN (programs give up at once,
// where REFUSED makes resolvers retry elsewhere) and says why in an extended
// DNS error for those who look.
func refuse(req *dns.Msg) *dns.Msg {
	m := new(dns.Msg).SetRcode(req, dns.RcodeNameError)
	if opt := req.IsEdns0(); opt != nil {
		m.SetEdns0(opt.UDPSize(), false)
		o := m.IsEdns0()
		o.Option = append(o.Option, &dns.EDNS0_EDE{
			InfoCode:  dns.ExtendedErrorCodeProhibited,
			ExtraText: "blocked by the sandbox's network policy",
		})
	}
	return m
}

func withoutAAAA(rrs []dns.RR) []dns.RR {
	out := rrs[:0]
	for _, rr := range rrs {
		if rr.Header().Rrtype != dns.TypeAAAA {
			out = append(out, rr)
		}
	}
	return out
}

func (r *resolver) record(id, name string, allowed bool, reason string) {
	v := VerdictDeny
	if allowed {
		v = VerdictAllow
	}
	r.events.record(Event{
		Time: time.Now(), SandboxID: id, Verdict: v, Reason: reason, Protocol: "dns",
		Dst: r.gateway, Port: 53, Domain: name,
	})
}

func addrOfNet(a net.Addr) netip.Addr {
	switch v := a.(type) {
	case *net.UDPAddr:
		ip, _ := netip.AddrFromSlice(v.IP)
		return ip.Unmap()
	case *net.TCPAddr:
		ip, _ := netip.AddrFromSlice(v.IP)
		return ip.Unmap()
	}
	return netip.Addr{}
}
