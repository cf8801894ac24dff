package btrfs

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
)

// encodeStream writes a version 1 send stream of the given commands, each
// a command and its attributes in order, the way the kernel lays it out.
func encodeStream(cmds ...streamCmdSpec) []byte {
	var b bytes.Buffer
	b.WriteString(streamMagic)
	binary.Write(&b, binary.LittleEndian, uint32(1))
	for _, c := range cmds {
		var payload bytes.Buffer
		for _, a := range c.attrs {
			binary.Write(&payload, binary.LittleEndian, uint16(a.typ))
			binary.Write(&payload, binary.LittleEndian, uint16(len(a.val)))
			payload.Write(a.val)
		}
		hdr := make([]byte, cmdHeaderSize)
		binary.LittleEndian.PutUint32(hdr[0:], uint32(payload.Len()))
		binary.LittleEndian.PutUint16(hdr[4:], uint16(c.cmd))
		crc := ^crc32.Update(crc32.Update(^uint32(0), castagnoli, hdr), castagnoli, payload.Bytes())
		binary.LittleEndian.PutUint32(hdr[6:], crc)
		b.Write(hdr)
		b.Write(payload.Bytes())
	}
	return b.Bytes()
}

type streamCmdSpec struct {
	cmd   sendCmd
	attrs []streamAttrSpec
}

type streamAttrSpec struct {
	typ sendAttr
	val []byte
}

func u64le(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func sampleStream() []byte {
	uuid := bytes.Repeat([]byte{1}, 16)
	parent := bytes.Repeat([]byte{2}, 16)
	ts := append(u64le(1700000000), 5, 0, 0, 0)
	return encodeStream(
		streamCmdSpec{cmdSnapshot, []streamAttrSpec{{attrPath, []byte("t1")}, {attrUUID, uuid}, {attrCtransid, u64le(9)}, {attrCloneUUID, parent}, {attrCloneCtransid, u64le(8)}}},
		streamCmdSpec{cmdMkfile, []streamAttrSpec{{attrPath, []byte("o257-9-0")}}},
		streamCmdSpec{cmdRename, []streamAttrSpec{{attrPath, []byte("o257-9-0")}, {attrPathTo, []byte("dir/file")}}},
		streamCmdSpec{cmdWrite, []streamAttrSpec{{attrPath, []byte("dir/file")}, {attrFileOffset, u64le(0)}, {attrData, []byte("hello")}}},
		streamCmdSpec{cmdUtimes, []streamAttrSpec{{attrPath, []byte("")}, {attrAtime, ts}, {attrMtime, ts}}},
		streamCmdSpec{cmdEnd, nil},
	)
}

// TestStreamReader decodes a stream laid out as the kernel does and refuses
// broken ones with ErrInvalid.
func TestStreamReader(t *testing.T) {
	r, err := newStreamReader(bytes.NewReader(sampleStream()))
	must(t, err)
	h, err := readHead(r)
	must(t, err)
	if h.name != "t1" || h.ctransid != 9 || h.parentCtransid != 8 || h.uuid[0] != 1 || h.parentUUID[0] != 2 {
		t.Errorf("head = %+v", h)
	}
	var got []sendCmd
	for {
		c, err := r.next()
		if err == io.EOF {
			break
		}
		must(t, err)
		got = append(got, c.cmd)
		if c.cmd == cmdWrite {
			if d, _ := c.get(attrData); string(d) != "hello" {
				t.Errorf("write data %q", d)
			}
		}
		if c.cmd == cmdUtimes {
			if p, err := c.path(attrPath); err != nil || p != "" {
				t.Errorf("the root's path: %q, %v", p, err)
			}
			if sec, nsec, err := c.timespec(attrMtime); err != nil || sec != 1700000000 || nsec != 5 {
				t.Errorf("mtime %d.%d, %v", sec, nsec, err)
			}
		}
	}
	want := []sendCmd{cmdMkfile, cmdRename, cmdWrite, cmdUtimes, cmdEnd}
	if len(got) != len(want) {
		t.Fatalf("commands %v, want %v", got, want)
	}

	for name, p := range map[string]string{
		"absolute": "/etc/passwd", "dotdot": "a/../../b", "dot": "./a", "empty part": "a//b", "nul": "a\x00b", "trailing": "a/",
	} {
		s := encodeStream(
			streamCmdSpec{cmdSnapshot, []streamAttrSpec{{attrPath, []byte("t1")}, {attrUUID, make([]byte, 16)}, {attrCtransid, u64le(1)}, {attrCloneUUID, make([]byte, 16)}, {attrCloneCtransid, u64le(1)}}},
			streamCmdSpec{cmdUnlink, []streamAttrSpec{{attrPath, []byte(p)}}},
		)
		r, err := newStreamReader(bytes.NewReader(s))
		must(t, err)
		_, err = readHead(r)
		must(t, err)
		c, err := r.next()
		must(t, err)
		if _, err := c.path(attrPath); !errdefs.IsInvalid(err) {
			t.Errorf("%s path %q: %v, want ErrInvalid", name, p, err)
		}
	}
	sample := sampleStream()
	for name, s := range map[string][]byte{
		"bad crc":        flip(sample, len(sample)-3),
		"cut in command": sample[:len(sample)-12],
		"huge command":   append(bytes.Clone(sample[:17]), 0xff, 0xff, 0xff, 0x7f, 3, 0, 0, 0, 0, 0),
	} {
		r, err := newStreamReader(bytes.NewReader(s))
		must(t, err)
		for err == nil {
			_, err = r.next()
		}
		if !errdefs.IsInvalid(err) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// FuzzSendStream feeds the decoder arbitrary bytes: it must return
// commands or an error, never panic or allocate without bound.
func FuzzSendStream(f *testing.F) {
	f.Add(sampleStream())
	f.Add([]byte(streamMagic + "\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := newStreamReader(bytes.NewReader(data))
		if err != nil {
			return
		}
		readHead(r)
		for range 1000 {
			c, err := r.next()
			if err != nil {
				return
			}
			for a := sendAttr(1); a <= maxAttr; a++ {
				c.path(a)
				c.u64(a)
				c.uuid(a)
				c.timespec(a)
			}
		}
	})
}
