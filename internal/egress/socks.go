package egress

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"
)

// socksConnect asks the SOCKS5 server on c (RFC 1928) to connect to dst,
// authenticating with username and password (RFC 1929) when a username is
// set. On success c carries dst's bytes. Done here rather than with
// x/net/proxy so that the connection stays a *net.TCPConn (half-closes
// and splice(2) keep working through the tunnel).
func socksConnect(c net.Conn, username, password string, dst netip.AddrPort) error {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	method := byte(0x00)
	if username != "" {
		method = 0x02
	}
	if _, err := c.Write([]byte{5, 1, method}); err != nil {
		return err
	}
	// Byte by byte from here: nothing after the reply may be read ahead.
	br := bufio.NewReaderSize(&oneByte{c}, 16)
	reply := make([]byte, 2)
	if _, err := io.ReadFull(br, reply); err != nil {
		return err
	}
	if reply[0] != 5 || reply[1] != method {
		return errors.New("the server refused our authentication method")
	}
	if method == 0x02 {
		msg := append([]byte{1, byte(len(username))}, username...)
		msg = append(append(msg, byte(len(password))), password...)
		if _, err := c.Write(msg); err != nil {
			return err
		}
		if _, err := io.ReadFull(br, reply); err != nil {
			return err
		}
		if reply[1] != 0 {
			return errors.New("the server refused the username and password")
		}
	}
	a4 := dst.Addr().As4()
	req := append([]byte{5, 1, 0, 1}, a4[:]...)
	req = binary.BigEndian.AppendUint16(req, dst.Port())
	if _, err := c.Write(req); err != nil {
		return err
	}
	head := make([]byte, 4)
	if _, err := io.ReadFull(br, head); err != nil {
		return err
	}
	if head[1] != 0 {
		return fmt.Errorf("the server could not connect to %s (reply %d)", dst, head[1])
	}
	var rest int
	switch head[3] {
	case 1:
		rest = 4 + 2
	case 4:
		rest = 16 + 2
	case 3:
		l := make([]byte, 1)
		if _, err := io.ReadFull(br, l); err != nil {
			return err
		}
		rest = int(l[0]) + 2
	default:
		return fmt.Errorf("the server answered address type %d", head[3])
	}
	_, err := io.ReadFull(br, make([]byte, rest))
	return err
}

// oneByte reads at most one byte per call, so a buffered reader over it
// never takes bytes past what was asked for.
type oneByte struct{ r io.Reader }

func (o *oneByte) Read(b []byte) (int, error) {
	if len(b) > 1 {
		b = b[:1]
	}
	return o.r.Read(b)
}
