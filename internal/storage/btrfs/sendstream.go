package btrfs

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
)

// The send-stream format (version 1) from the kernel's fs/btrfs/send.h: a
// header (magic, then a little-endian u32 version), then commands. A command
// is a 10-byte header (u32 length of what follows, u16 command, u32 crc32c of
// the header with the crc zeroed and the payload) and attributes, each a u16
// type, a u16 length and the value.
const (
	streamMagic      = "btrfs-stream\x00"
	cmdHeaderSize    = 10
	attrHeaderSize   = 4
	maxStreamCommand = 1 << 20 // v1 commands fit in 64 KiB; a larger length is corruption
)

// sendCmd is a send-stream command (enum btrfs_send_cmd).
type sendCmd uint16

const (
	cmdSubvol       sendCmd = 1
	cmdSnapshot     sendCmd = 2
	cmdMkfile       sendCmd = 3
	cmdMkdir        sendCmd = 4
	cmdMknod        sendCmd = 5
	cmdMkfifo       sendCmd = 6
	cmdMksock       sendCmd = 7
	cmdSymlink      sendCmd = 8
	cmdRename       sendCmd = 9
	cmdLink         sendCmd = 10
	cmdUnlink       sendCmd = 11
	cmdRmdir        sendCmd = 12
	cmdSetXattr     sendCmd = 13
	cmdRemoveXattr  sendCmd = 14
	cmdWrite        sendCmd = 15
	cmdClone        sendCmd = 16
	cmdTruncate     sendCmd = 17
	cmdChmod        sendCmd = 18
	cmdChown        sendCmd = 19
	cmdUtimes       sendCmd = 20
	cmdEnd          sendCmd = 21
	cmdUpdateExtent sendCmd = 22
)

var cmdNames = map[sendCmd]string{
	cmdSubvol: "subvol", cmdSnapshot: "snapshot", cmdMkfile: "mkfile", cmdMkdir: "mkdir",
	cmdMknod: "mknod", cmdMkfifo: "mkfifo", cmdMksock: "mksock", cmdSymlink: "symlink",
	cmdRename: "rename", cmdLink: "link", cmdUnlink: "unlink", cmdRmdir: "rmdir",
	cmdSetXattr: "set_xattr", cmdRemoveXattr: "remove_xattr", cmdWrite: "write",
	cmdClone: "clone", cmdTruncate: "truncate", cmdChmod: "chmod", cmdChown: "chown",
	cmdUtimes: "utimes", cmdEnd: "end", cmdUpdateExtent: "update_extent",
}

func (c sendCmd) String() string {
	if n, ok := cmdNames[c]; ok {
		return n
	}
	return fmt.Sprintf("command %d", uint16(c))
}

// sendAttr is a send-stream attribute type (BTRFS_SEND_A_*).
type sendAttr uint16

const (
	attrUUID          sendAttr = 1
	attrCtransid      sendAttr = 2
	attrSize          sendAttr = 4
	attrMode          sendAttr = 5
	attrUID           sendAttr = 6
	attrGID           sendAttr = 7
	attrRdev          sendAttr = 8
	attrMtime         sendAttr = 10
	attrAtime         sendAttr = 11
	attrXattrName     sendAttr = 13
	attrXattrData     sendAttr = 14
	attrPath          sendAttr = 15
	attrPathTo        sendAttr = 16
	attrPathLink      sendAttr = 17
	attrFileOffset    sendAttr = 18
	attrData          sendAttr = 19
	attrCloneUUID     sendAttr = 20
	attrCloneCtransid sendAttr = 21
	attrClonePath     sendAttr = 22
	attrCloneOffset   sendAttr = 23
	attrCloneLen      sendAttr = 24

	maxAttr = 31 // v1 defines up to 24; later versions stay below this
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// streamCommand is one decoded command. Its values point into the reader's
// buffer and are valid until the next call to next.
type streamCommand struct {
	cmd   sendCmd
	attrs [maxAttr + 1][]byte
	has   [maxAttr + 1]bool
}

// streamReader decodes one send stream.
type streamReader struct {
	r   *bufio.Reader
	buf []byte
	c   streamCommand
	n   int // commands read, for error messages
}

func streamErr(format string, args ...any) error {
	return fmt.Errorf("send stream: "+format+": %w", append(args, errdefs.ErrInvalid)...)
}

// newStreamReader checks the stream's header.
func newStreamReader(r io.Reader) (*streamReader, error) {
	br := bufio.NewReaderSize(r, 128<<10)
	var hdr [len(streamMagic) + 4]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return nil, streamErr("short header: %v", err)
	}
	if string(hdr[:len(streamMagic)]) != streamMagic {
		return nil, streamErr("not a btrfs send stream")
	}
	if v := binary.LittleEndian.Uint32(hdr[len(streamMagic):]); v != 1 {
		return nil, streamErr("version %d; only version 1 is read", v)
	}
	return &streamReader{r: br, buf: make([]byte, 64<<10)}, nil
}

// next decodes the next command; io.EOF at the end of the input.
func (s *streamReader) next() (*streamCommand, error) {
	var hdr [cmdHeaderSize]byte
	if _, err := io.ReadFull(s.r, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, streamErr("command %d: short header: %v", s.n, err)
	}
	size := binary.LittleEndian.Uint32(hdr[0:4])
	cmd := sendCmd(binary.LittleEndian.Uint16(hdr[4:6]))
	want := binary.LittleEndian.Uint32(hdr[6:10])
	if size > maxStreamCommand {
		return nil, streamErr("command %d (%s): length %d", s.n, cmd, size)
	}
	if int(size) > len(s.buf) {
		s.buf = make([]byte, size)
	}
	payload := s.buf[:size]
	if _, err := io.ReadFull(s.r, payload); err != nil {
		return nil, streamErr("command %d (%s): short payload: %v", s.n, cmd, err)
	}
	// The kernel's crc32c starts from 0 and is not inverted; Go's starts
	// from ^0 and inverts, hence the complements.
	clear(hdr[6:10])
	crc := crc32.Update(^uint32(0), castagnoli, hdr[:])
	if got := ^crc32.Update(crc, castagnoli, payload); got != want {
		return nil, streamErr("command %d (%s): checksum %08x, want %08x", s.n, cmd, got, want)
	}
	c := &s.c
	*c = streamCommand{cmd: cmd}
	for len(payload) > 0 {
		if len(payload) < attrHeaderSize {
			return nil, streamErr("command %d (%s): truncated attribute", s.n, cmd)
		}
		typ := sendAttr(binary.LittleEndian.Uint16(payload[0:2]))
		n := int(binary.LittleEndian.Uint16(payload[2:4]))
		payload = payload[attrHeaderSize:]
		if n > len(payload) {
			return nil, streamErr("command %d (%s): attribute %d runs past the command", s.n, cmd, typ)
		}
		if typ == 0 || typ > maxAttr {
			return nil, streamErr("command %d (%s): unknown attribute %d", s.n, cmd, typ)
		}
		c.attrs[typ], c.has[typ] = payload[:n:n], true
		payload = payload[n:]
	}
	s.n++
	return c, nil
}

func (c *streamCommand) get(a sendAttr) ([]byte, error) {
	if !c.has[a] {
		return nil, streamErr("%s without attribute %d", c.cmd, a)
	}
	return c.attrs[a], nil
}

func (c *streamCommand) u64(a sendAttr) (uint64, error) {
	b, err := c.get(a)
	if err != nil {
		return 0, err
	}
	if len(b) != 8 {
		return 0, streamErr("%s: attribute %d is %d bytes, want 8", c.cmd, a, len(b))
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (c *streamCommand) uuid(a sendAttr) (subvolUUID, error) {
	b, err := c.get(a)
	if err != nil {
		return subvolUUID{}, err
	}
	var u subvolUUID
	if len(b) != len(u) {
		return u, streamErr("%s: attribute %d is %d bytes, want 16", c.cmd, a, len(b))
	}
	copy(u[:], b)
	return u, nil
}

// timespec decodes a btrfs_timespec: u64 seconds, u32 nanoseconds.
func (c *streamCommand) timespec(a sendAttr) (sec int64, nsec int64, err error) {
	b, err := c.get(a)
	if err != nil {
		return 0, 0, err
	}
	if len(b) != 12 {
		return 0, 0, streamErr("%s: attribute %d is %d bytes, want 12", c.cmd, a, len(b))
	}
	ns := binary.LittleEndian.Uint32(b[8:])
	if ns >= 1e9 {
		return 0, 0, streamErr("%s: %d nanoseconds", c.cmd, ns)
	}
	return int64(binary.LittleEndian.Uint64(b)), int64(ns), nil
}

// path decodes a path attribute: relative to the volume being received,
// "" for its root, never absolute or with "." or ".." components.
func (c *streamCommand) path(a sendAttr) (string, error) {
	b, err := c.get(a)
	if err != nil {
		return "", err
	}
	p := string(b)
	if p == "" {
		return "", nil
	}
	if strings.IndexByte(p, 0) >= 0 || strings.HasPrefix(p, "/") {
		return "", streamErr("%s: bad path %q", c.cmd, p)
	}
	for part := range strings.SplitSeq(p, "/") {
		if part == "" || part == "." || part == ".." {
			return "", streamErr("%s: bad path %q", c.cmd, p)
		}
	}
	return p, nil
}

// streamHead is what a stream's first command says of it.
type streamHead struct {
	name           string     // the sent volume's name
	uuid           subvolUUID // its identity (its received UUID if it had one)
	ctransid       uint64
	parentUUID     subvolUUID // the volume it is a delta against
	parentCtransid uint64

	clonesParent bool // a CLONE in the stream reads from the parent (see checkChain)
}

// readHead reads a stream's first command, which must be a snapshot (an
// incremental stream): archives are never full streams.
func readHead(s *streamReader) (streamHead, error) {
	h, full, err := readAnyHead(s)
	if err == nil && full {
		return h, streamErr("starts with %s, not an incremental snapshot", cmdSubvol)
	}
	return h, err
}

// readAnyHead reads a stream's first command: a snapshot (an incremental
// stream) or a subvol (a full one, full set).
func readAnyHead(s *streamReader) (h streamHead, full bool, err error) {
	c, err := s.next()
	if err == io.EOF {
		return streamHead{}, false, streamErr("empty")
	}
	if err != nil {
		return streamHead{}, false, err
	}
	if c.cmd == cmdSubvol {
		h, err = readSubvolHead(c)
		return h, true, err
	}
	if c.cmd != cmdSnapshot {
		return streamHead{}, false, streamErr("starts with %s, not a subvolume or a snapshot", c.cmd)
	}
	h, err = readSnapshotHead(c)
	return h, false, err
}

// readSubvolHead decodes what a stream's first command says of the volume
// sent: a full stream's SUBVOL, or the start of a SNAPSHOT.
func readSubvolHead(c *streamCommand) (streamHead, error) {
	var h streamHead
	var err error
	if h.name, err = c.path(attrPath); err == nil && (h.name == "" || strings.Contains(h.name, "/")) {
		err = streamErr("%s named %q", c.cmd, h.name)
	}
	if err != nil {
		return h, err
	}
	if h.uuid, err = c.uuid(attrUUID); err != nil {
		return h, err
	}
	h.ctransid, err = c.u64(attrCtransid)
	return h, err
}

// readSnapshotHead decodes an incremental stream's SNAPSHOT command: the
// volume sent and the one it is a delta against.
func readSnapshotHead(c *streamCommand) (streamHead, error) {
	h, err := readSubvolHead(c)
	if err != nil {
		return h, err
	}
	if h.parentUUID, err = c.uuid(attrCloneUUID); err != nil {
		return h, err
	}
	h.parentCtransid, err = c.u64(attrCloneCtransid)
	return h, err
}
