package network

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The egress audit.
//
// Mechanism: the ruleset's log statements send each connection-opening
// packet to an NFLOG group (nfnetlink_log), read here over a netlink socket.
// Conntrack events were the alternative, but the kernel only reports a
// connection once it is confirmed, i.e. accepted: a rejected attempt never
// produces one, and those are the attempts an operator most wants to see.
// NFLOG sees both, carries the verdict and reason in the rule's prefix, and
// needs no per-packet work in user space beyond parsing one header. (No
// NFLOG client library is on the module proxy here; the protocol is small
// enough to speak with mdlayher/netlink, which nftables already pulls in.)

// Verdicts.
const (
	VerdictAllow = "allow"
	VerdictDeny  = "deny"
)

// Event is one outbound connection attempt of a sandbox, or one name it
// asked the resolver for (Protocol "dns").
type Event struct {
	Seq       uint64     `json:"seq"`
	Time      time.Time  `json:"time"`
	SandboxID string     `json:"sandboxID"`
	Verdict   string     `json:"verdict"`
	Reason    string     `json:"reason"`
	Protocol  string     `json:"protocol"`
	Dst       netip.Addr `json:"destination"`
	Port      uint16     `json:"port,omitempty"`
	Domain    string     `json:"domain,omitempty"`
}

// nfnetlink_log protocol (linux/netfilter/nfnetlink_log.h).
const (
	nfulnlMsgPacket = 0
	nfulnlMsgConfig = 1

	nfulaCfgCmd  = 1
	nfulaCfgMode = 2

	nfulnlCfgCmdBind = 1
	nfulnlCopyPacket = 2

	nfulaTimestamp = 3
	nfulaPayload   = 9
	nfulaPrefix    = 10
)

// nflog is a bound NFLOG group.
type nflog struct {
	conn  *netlink.Conn
	group uint16
}

func openNFLOG(netnsFD int, group uint16) (*nflog, error) {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: netnsFD})
	if err != nil {
		return nil, fmt.Errorf("open nflog socket: %w", err)
	}
	l := &nflog{conn: c, group: group}
	if err := l.config(unix.AF_UNSPEC, netlink.Attribute{Type: nfulaCfgCmd, Data: []byte{nfulnlCfgCmdBind}}); err != nil {
		c.Close()
		if errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("nflog group %d is taken by another process (another warren daemon on this host?): %w", group, err)
		}
		return nil, fmt.Errorf("bind nflog group %d: %w", group, err)
	}
	mode := make([]byte, 6)
	binary.BigEndian.PutUint32(mode, snaplen)
	mode[4] = nfulnlCopyPacket
	if err := l.config(unix.AF_UNSPEC, netlink.Attribute{Type: nfulaCfgMode, Data: mode}); err != nil {
		c.Close()
		return nil, fmt.Errorf("set nflog copy mode: %w", err)
	}
	// A burst of denied attempts must not overflow the socket; what still
	// does is counted (ENOBUFS) and reported.
	_ = c.SetReadBuffer(4 << 20)
	return l, nil
}

func (l *nflog) config(family uint8, attrs ...netlink.Attribute) error {
	data, err := netlink.MarshalAttributes(attrs)
	if err != nil {
		return err
	}
	hdr := []byte{family, 0, 0, 0}
	binary.BigEndian.PutUint16(hdr[2:], l.group)
	_, err = l.conn.Execute(netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(unix.NFNL_SUBSYS_ULOG<<8 | nfulnlMsgConfig),
			Flags: netlink.Request | netlink.Acknowledge,
		},
		Data: append(hdr, data...),
	})
	return err
}

// close releases the group with the socket. (An explicit unbind would need
// the connection's lock, which the reader holds while it waits.)
func (l *nflog) close() error {
	return l.conn.Close()
}

// logRecord is one parsed NFLOG packet.
type logRecord struct {
	time    time.Time
	verdict string
	reason  string
	proto   string
	src     netip.Addr
	dst     netip.Addr
	port    uint16
}

func parseNFLOG(m netlink.Message) (logRecord, bool) {
	var r logRecord
	if m.Header.Type != netlink.HeaderType(unix.NFNL_SUBSYS_ULOG<<8|nfulnlMsgPacket) || len(m.Data) < 4 {
		return r, false
	}
	ad, err := netlink.NewAttributeDecoder(m.Data[4:])
	if err != nil {
		return r, false
	}
	ad.ByteOrder = binary.BigEndian
	var prefix string
	var payload []byte
	for ad.Next() {
		switch ad.Type() {
		case nfulaPrefix:
			prefix = strings.TrimRight(ad.String(), "\x00")
		case nfulaPayload:
			payload = ad.Bytes()
		case nfulaTimestamp:
			if b := ad.Bytes(); len(b) == 16 {
				sec := binary.BigEndian.Uint64(b[:8])
				usec := binary.BigEndian.Uint64(b[8:])
				if sec != 0 {
					r.time = time.Unix(int64(sec), int64(usec)*1000)
				}
			}
		}
	}
	if ad.Err() != nil {
		return r, false
	}
	rest, ok := strings.CutPrefix(prefix, logPrefix)
	if !ok {
		return r, false
	}
	v, reason, ok := strings.Cut(rest, ":")
	if !ok {
		return r, false
	}
	switch v {
	case "A":
		r.verdict = VerdictAllow
	case "D":
		r.verdict = VerdictDeny
	default:
		return r, false
	}
	r.reason = reason
	if r.time.IsZero() {
		// Forwarded packets usually carry no receive timestamp.
		r.time = time.Now()
	}
	return r, parsePacket(payload, &r)
}

// parsePacket reads addresses, protocol and destination port from the start
// of an IP packet.
func parsePacket(b []byte, r *logRecord) bool {
	if len(b) < 1 {
		return false
	}
	var proto byte
	var l4 []byte
	switch b[0] >> 4 {
	case 4:
		ihl := int(b[0]&0x0f) * 4
		if len(b) < 20 || ihl < 20 {
			return false
		}
		proto = b[9]
		r.src = netip.AddrFrom4([4]byte(b[12:16]))
		r.dst = netip.AddrFrom4([4]byte(b[16:20]))
		// Only the first fragment carries the transport header.
		if binary.BigEndian.Uint16(b[6:8])&0x1fff == 0 && len(b) > ihl {
			l4 = b[ihl:]
		}
	case 6:
		if len(b) < 40 {
			return false
		}
		proto = b[6]
		r.src = netip.AddrFrom16([16]byte(b[8:24]))
		r.dst = netip.AddrFrom16([16]byte(b[24:40]))
		l4 = b[40:]
	default:
		return false
	}
	switch proto {
	case unix.IPPROTO_TCP:
		r.proto = "tcp"
	case unix.IPPROTO_UDP:
		r.proto = "udp"
	case unix.IPPROTO_ICMP, unix.IPPROTO_ICMPV6:
		r.proto = "icmp"
	case unix.IPPROTO_SCTP:
		r.proto = "sctp"
	default:
		r.proto = fmt.Sprintf("ip-proto-%d", proto)
	}
	if (proto == unix.IPPROTO_TCP || proto == unix.IPPROTO_UDP || proto == unix.IPPROTO_SCTP) && len(l4) >= 4 {
		r.port = binary.BigEndian.Uint16(l4[2:4])
	}
	return true
}

// eventRing keeps the newest events of one sandbox.
type eventRing struct {
	buf   []Event
	start int // index of the oldest event when full
	full  bool
}

func (r *eventRing) add(e Event, capacity int) {
	if !r.full {
		r.buf = append(r.buf, e)
		if len(r.buf) == capacity {
			r.full = true
		}
		return
	}
	r.buf[r.start] = e
	r.start = (r.start + 1) % len(r.buf)
}

// after returns up to limit events with Seq > seq, oldest first.
func (r *eventRing) after(seq uint64, limit int) []Event {
	var out []Event
	n := len(r.buf)
	for i := 0; i < n && len(out) < limit; i++ {
		e := r.buf[(r.start+i)%n]
		if e.Seq > seq {
			out = append(out, e)
		}
	}
	return out
}

// events holds every sandbox's ring.
type events struct {
	mu       sync.Mutex
	seq      uint64
	capacity int
	rings    map[string]*eventRing
	onEvent  func(Event)
}

func (ev *events) record(e Event) {
	ev.mu.Lock()
	ev.seq++
	e.Seq = ev.seq
	r := ev.rings[e.SandboxID]
	if r == nil {
		r = &eventRing{}
		ev.rings[e.SandboxID] = r
	}
	r.add(e, ev.capacity)
	ev.mu.Unlock()
	if ev.onEvent != nil {
		ev.onEvent(e)
	}
}

func (ev *events) list(id string, after uint64, limit int) []Event {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	r := ev.rings[id]
	if r == nil {
		return nil
	}
	return r.after(after, limit)
}

func (ev *events) forget(id string) {
	ev.mu.Lock()
	delete(ev.rings, id)
	ev.mu.Unlock()
}

// audit turns the NFLOG records of the ruleset's log rules into events,
// attributed to sandboxes by their source address, on a goroutine of its
// own from startAudit until close.
type audit struct {
	nflog   *nflog
	events  *events
	sources attributor
	log     *slog.Logger
	done    chan struct{}
	closing atomic.Bool
}

// attributor names the sandbox an address belongs to (the registry).
type attributor interface {
	attribute(src, dst netip.Addr) (id, domain string)
}

// startAudit subscribes to NFLOG group in the namespace netnsFD and starts
// reading.
func startAudit(netnsFD int, group uint16, ev *events, sources attributor, log *slog.Logger) (*audit, error) {
	l, err := openNFLOG(netnsFD, group)
	if err != nil {
		return nil, err
	}
	a := &audit{nflog: l, events: ev, sources: sources, log: log, done: make(chan struct{})}
	go a.read()
	return a, nil
}

// close stops the reading and waits for it to end.
func (a *audit) close() error {
	a.closing.Store(true)
	err := a.nflog.close()
	<-a.done
	return err
}

// read turns NFLOG records into events until the socket is closed.
func (a *audit) read() {
	defer close(a.done)
	for {
		msgs, err := a.nflog.conn.Receive()
		if err != nil {
			if errors.Is(err, unix.ENOBUFS) {
				a.log.Warn("network audit: the kernel dropped log records (socket buffer full)")
				continue
			}
			if a.closing.Load() {
				return
			}
			a.log.Error("network audit: read failed; the audit stops", "err", err)
			return
		}
		for _, msg := range msgs {
			r, ok := parseNFLOG(msg)
			if !ok {
				continue
			}
			id, domain := a.sources.attribute(r.src, r.dst)
			if id == "" {
				a.log.Debug("network audit: attempt from an address no sandbox has", "src", r.src, "dst", r.dst, "verdict", r.verdict)
				continue
			}
			a.events.record(Event{
				Time: r.time, SandboxID: id, Verdict: r.verdict, Reason: r.reason,
				Protocol: r.proto, Dst: r.dst, Port: r.port, Domain: domain,
			})
		}
	}
}
