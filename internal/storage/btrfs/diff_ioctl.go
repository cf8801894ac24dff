package btrfs

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The ioctls and on-disk keys the diff reads, from linux/btrfs.h and
// linux/btrfs_tree.h.
const (
	iocTreeSearchV2   = 0xc0709411 // _IOWR(0x94, 17, struct btrfs_ioctl_search_args_v2)
	iocInoPaths       = 0xc0389423 // _IOWR(0x94, 35, struct btrfs_ioctl_ino_path_args)
	iocGetSubvolInfo  = 0x81f8943c // _IOR(0x94, 60, struct btrfs_ioctl_get_subvol_info_args)
	treeRoot          = 1          // BTRFS_ROOT_TREE_OBJECTID
	treeUUID          = 9          // BTRFS_UUID_TREE_OBJECTID
	keyInodeItem      = 1          // BTRFS_INODE_ITEM_KEY
	keyRootItem       = 132        // BTRFS_ROOT_ITEM_KEY
	keyUUIDSubvol     = 251        // BTRFS_UUID_KEY_SUBVOL
	inodeItemLen      = 160        // sizeof(struct btrfs_inode_item)
	inodeTransidOff   = 8          // offsetof(struct btrfs_inode_item, transid)
	inodeModeOff      = 52         // offsetof(struct btrfs_inode_item, mode)
	rootItemUUIDOff   = 247        // offsetof(struct btrfs_root_item, uuid)
	rootItemParentOff = 263        // offsetof(struct btrfs_root_item, parent_uuid)
	rootItemRecvOff   = 279        // offsetof(struct btrfs_root_item, received_uuid)
	rootItemFlagsOff  = 208        // offsetof(struct btrfs_root_item, flags)
	rootSubvolRdonly  = 1 << 0     // BTRFS_ROOT_SUBVOL_RDONLY, in root item flags
	rootItemOtransOff = 303        // offsetof(struct btrfs_root_item, otransid)
	searchBufSize     = 64 << 10
	inoPathsBufSize   = 4096 // the kernel caps the reply at this
)

type subvolUUID [16]byte

func (u subvolUUID) zero() bool { return u == subvolUUID{} }

func (u subvolUUID) String() string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// searchArgsV2 is struct btrfs_ioctl_search_args_v2 followed by its buffer.
type searchArgsV2 struct {
	Key     searchKey
	BufSize uint64
	Buf     [searchBufSize]byte
}

// ioctlTimespec is struct btrfs_ioctl_timespec (padded to 16 bytes).
type ioctlTimespec struct {
	Sec  uint64
	Nsec uint32
	_    uint32
}

// subvolInfoArgs is struct btrfs_ioctl_get_subvol_info_args (504 bytes).
type subvolInfoArgs struct {
	TreeID       uint64
	Name         [256]byte
	ParentID     uint64
	DirID        uint64
	Generation   uint64
	Flags        uint64
	UUID         subvolUUID
	ParentUUID   subvolUUID
	ReceivedUUID subvolUUID
	Ctransid     uint64
	Otransid     uint64
	Stransid     uint64
	Rtransid     uint64
	Ctime        ioctlTimespec
	Otime        ioctlTimespec
	Stime        ioctlTimespec
	Rtime        ioctlTimespec
	_            [8]uint64
}

// inoPathArgs is struct btrfs_ioctl_ino_path_args (56 bytes).
type inoPathArgs struct {
	Inum   uint64
	Size   uint64
	_      [4]uint64
	Fspath uint64 // user pointer to a struct btrfs_data_container
}

var (
	_ [504 - unsafe.Sizeof(subvolInfoArgs{})]struct{}
	_ [unsafe.Sizeof(subvolInfoArgs{}) - 504]struct{}
	_ [56 - unsafe.Sizeof(inoPathArgs{})]struct{}
	_ [unsafe.Sizeof(inoPathArgs{}) - 56]struct{}
)

// diffSubvol is what the diff needs to know of one diffSubvol.
type diffSubvol struct {
	id         uint64
	uuid       subvolUUID
	parentUUID subvolUUID
	received   subvolUUID // the volume it was received (restored) as, if any
	otransid   uint64     // the transaction that created it
	readOnly   bool
}

// getSubvolInfo describes the diffSubvol open at fd. The ioctl works for
// unprivileged users too.
func getSubvolInfo(fd int) (diffSubvol, error) {
	var a subvolInfoArgs
	if err := ioctl(fd, iocGetSubvolInfo, unsafe.Pointer(&a)); err != nil {
		return diffSubvol{}, err
	}
	return diffSubvol{id: a.TreeID, uuid: a.UUID, parentUUID: a.ParentUUID, received: a.ReceivedUUID, otransid: a.Otransid, readOnly: a.Flags&rootSubvolRdonly != 0}, nil
}

// treeItem is one item a tree search returned.
type treeItem struct {
	transid  uint64 // the generation of the leaf holding it
	objectid uint64
	offset   uint64
	typ      uint32
	data     []byte // aliases the search buffer: copy what must outlive fn
}

// treeSearchV2 calls fn for every item of tree (0 = the diffSubvol of fd)
// between the keys (minObj, minType, minOff) and (maxObj, maxType, maxOff),
// in key order, in leaves written in transaction minTransid or later.
// fn returns false to stop. It needs CAP_SYS_ADMIN.
//
// Leaves (and whole subtrees) older than minTransid are skipped by the
// kernel without being read: that is what makes the diff fast.
func treeSearchV2(fd int, tree, minObj uint64, minType uint32, maxObj uint64, maxType uint32, minTransid uint64, fn func(treeItem) bool) error {
	a := new(searchArgsV2)
	k := &a.Key
	k.TreeID = tree
	k.MinObjectID, k.MinType, k.MinOffset = minObj, minType, 0
	k.MaxObjectID, k.MaxType, k.MaxOffset = maxObj, maxType, ^uint64(0)
	k.MinTransid, k.MaxTransid = minTransid, ^uint64(0)
	for {
		k.NrItems = ^uint32(0)
		a.BufSize = searchBufSize
		if err := ioctl(fd, iocTreeSearchV2, unsafe.Pointer(a)); err != nil {
			return err
		}
		if k.NrItems == 0 {
			return nil
		}
		last, more, err := eachSearchItem(a.Buf[:], k.NrItems, fn)
		if err != nil || !more || !k.advance(last) {
			return err
		}
	}
}

// eachSearchItem calls fn for each of the n items of a tree search reply
// in buf. It returns the last item fn saw and whether fn wants more.
func eachSearchItem(buf []byte, n uint32, fn func(treeItem) bool) (last treeItem, more bool, err error) {
	for i := uint32(0); i < n; i++ {
		if len(buf) < 32 {
			return last, false, fmt.Errorf("tree search: truncated reply")
		}
		it := treeItem{
			transid:  binary.LittleEndian.Uint64(buf[0:]),
			objectid: binary.LittleEndian.Uint64(buf[8:]),
			offset:   binary.LittleEndian.Uint64(buf[16:]),
			typ:      binary.LittleEndian.Uint32(buf[24:]),
		}
		size := int(binary.LittleEndian.Uint32(buf[28:]))
		if len(buf) < 32+size {
			return last, false, fmt.Errorf("tree search: truncated item")
		}
		it.data = buf[32 : 32+size]
		buf = buf[32+size:]
		if !fn(it) {
			return it, false, nil
		}
		last = it
	}
	return last, true, nil
}

// advance moves the search's start past last, the last key a reply
// returned; false when nothing of the range is left.
func (k *searchKey) advance(last treeItem) bool {
	switch {
	case last.offset < ^uint64(0):
		k.MinObjectID, k.MinType, k.MinOffset = last.objectid, last.typ, last.offset+1
	case last.typ < 255:
		k.MinObjectID, k.MinType, k.MinOffset = last.objectid, last.typ+1, 0
	case last.objectid < ^uint64(0):
		k.MinObjectID, k.MinType, k.MinOffset = last.objectid+1, 0, 0
	default:
		return false
	}
	return k.MinObjectID < k.MaxObjectID || (k.MinObjectID == k.MaxObjectID && k.MinType <= k.MaxType)
}

// lookupSubvolByUUID finds a diffSubvol of the filesystem of fd by subvolUUID
// (through the subvolUUID tree) and reads its root item. ok is false when no
// such diffSubvol exists any more.
func lookupSubvolByUUID(fd int, u subvolUUID) (sv diffSubvol, ok bool, err error) {
	hi := binary.LittleEndian.Uint64(u[0:8])
	lo := binary.LittleEndian.Uint64(u[8:16])
	var id uint64
	err = treeSearchV2(fd, treeUUID, hi, keyUUIDSubvol, hi, keyUUIDSubvol, 0, func(it treeItem) bool {
		if it.typ == keyUUIDSubvol && it.offset == lo && len(it.data) >= 8 {
			id = binary.LittleEndian.Uint64(it.data)
			return false
		}
		return true
	})
	if err != nil || id == 0 {
		return diffSubvol{}, false, err
	}
	sv, ok, err = readRootItem(fd, id)
	if ok && sv.uuid != u {
		return diffSubvol{}, false, nil // the id was reused
	}
	return sv, ok, err
}

// readRootItem reads the ROOT_ITEM of diffSubvol id from the root tree.
func readRootItem(fd int, id uint64) (sv diffSubvol, ok bool, err error) {
	err = treeSearchV2(fd, treeRoot, id, keyRootItem, id, keyRootItem, 0, func(it treeItem) bool {
		if it.typ != keyRootItem || it.objectid != id || len(it.data) < rootItemOtransOff+8 {
			return true
		}
		sv.id = id
		copy(sv.uuid[:], it.data[rootItemUUIDOff:])
		copy(sv.parentUUID[:], it.data[rootItemParentOff:])
		copy(sv.received[:], it.data[rootItemRecvOff:])
		sv.otransid = binary.LittleEndian.Uint64(it.data[rootItemOtransOff:])
		sv.readOnly = binary.LittleEndian.Uint64(it.data[rootItemFlagsOff:])&rootSubvolRdonly != 0
		ok = true
		return false
	})
	return sv, ok, err
}

// inodePaths returns every path (relative to the diffSubvol root, without
// a leading slash) of inode ino in the diffSubvol open at fd. complete is
// false when the kernel's reply could not hold them all.
func inodePaths(fd int, ino uint64, buf []byte) (paths []string, complete bool, err error) {
	clear(buf[:16])
	a := inoPathArgs{Inum: ino, Size: uint64(len(buf)), Fspath: uint64(uintptr(unsafe.Pointer(&buf[0])))}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), iocInoPaths, uintptr(unsafe.Pointer(&a)))
	if errno != 0 {
		return nil, false, errno
	}
	// struct btrfs_data_container: u32 bytes_left, bytes_missing,
	// elem_cnt, elem_missed; u64 val[] holding offsets from &val[0].
	cnt := binary.LittleEndian.Uint32(buf[8:])
	missed := binary.LittleEndian.Uint32(buf[12:])
	vals := buf[16:]
	for i := uint32(0); i < cnt; i++ {
		off := binary.LittleEndian.Uint64(vals[8*i:])
		if off >= uint64(len(vals)) {
			return nil, false, fmt.Errorf("inode paths: bad offset")
		}
		s := vals[off:]
		end := 0
		for end < len(s) && s[end] != 0 {
			end++
		}
		paths = append(paths, string(s[:end]))
	}
	return paths, missed == 0, nil
}
