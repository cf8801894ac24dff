package btrfs

import (
	"encoding/binary"
	"runtime"
	"unsafe"
)

// The quota-group ioctls, from linux/btrfs.h. The numbers are computed from
// the struct sizes below (checked at compile time) and were checked against
// a 6.18 kernel: a wrong number fails with ENOTTY.
const (
	iocTreeSearch   = 0xd0009411 // _IOWR(0x94, 17, struct btrfs_ioctl_search_args), 4096 bytes
	iocQgroupAssign = 0x40189429 // _IOW(0x94, 41, struct btrfs_ioctl_qgroup_assign_args), 24 bytes
	iocQgroupCreate = 0x4010942a // _IOW(0x94, 42, struct btrfs_ioctl_qgroup_create_args), 16 bytes
	// The kernel declares QGROUP_LIMIT as _IOR although it reads the
	// argument; the number must match its declaration.
	iocQgroupLimit = 0x8030942b // _IOR(0x94, 43, struct btrfs_ioctl_qgroup_limit_args), 48 bytes

	subvolQgroupInherit = 1 << 2 // BTRFS_SUBVOL_QGROUP_INHERIT

	qgroupLimitMaxRfer = 1 << 0 // BTRFS_QGROUP_LIMIT_MAX_RFER
	qgroupLimitMaxExcl = 1 << 1 // BTRFS_QGROUP_LIMIT_MAX_EXCL
	// qgroupLimitClear as a max_* value removes that limit.
	qgroupLimitClear = ^uint64(0)

	rootTreeObjectID  = 1   // BTRFS_ROOT_TREE_OBJECTID
	quotaTreeObjectID = 8   // BTRFS_QUOTA_TREE_OBJECTID
	rootBackrefKey    = 144 // BTRFS_ROOT_BACKREF_KEY: (subvol, 144, parent subvol) while linked
	qgroupRelationKey = 246 // BTRFS_QGROUP_RELATION_KEY: (qgroup, 246, related qgroup)
)

// qgroupID builds a qgroup id "level/id" as the kernel packs it.
func qgroupID(level uint16, id uint64) uint64 { return uint64(level)<<48 | id }

// qgroupLimit is struct btrfs_qgroup_limit.
type qgroupLimit struct {
	Flags   uint64
	MaxRfer uint64
	MaxExcl uint64
	RsvRfer uint64
	RsvExcl uint64
}

// qgroupInherit is struct btrfs_qgroup_inherit with room for one qgroup
// in its trailing array (warren never asks for more).
type qgroupInherit struct {
	Flags         uint64
	NumQgroups    uint64
	NumRefCopies  uint64
	NumExclCopies uint64
	Lim           qgroupLimit
	Qgroups       [1]uint64
}

type qgroupLimitArgs struct {
	QgroupID uint64
	Lim      qgroupLimit
}

type qgroupAssignArgs struct {
	Assign uint64
	Src    uint64
	Dst    uint64
}

type qgroupCreateArgs struct {
	Create   uint64
	QgroupID uint64
}

// searchKey is struct btrfs_ioctl_search_key (104 bytes).
type searchKey struct {
	TreeID      uint64
	MinObjectID uint64
	MaxObjectID uint64
	MinOffset   uint64
	MaxOffset   uint64
	MinTransid  uint64
	MaxTransid  uint64
	MinType     uint32
	MaxType     uint32
	NrItems     uint32
	_           uint32
	_           [4]uint64
}

// searchArgs is struct btrfs_ioctl_search_args (4096 bytes).
type searchArgs struct {
	Key searchKey
	Buf [4096 - 104]byte
}

// searchHeaderSize is sizeof(struct btrfs_ioctl_search_header): transid,
// objectid, offset (u64), type, len (u32).
const searchHeaderSize = 32

var (
	_ [24 - unsafe.Sizeof(qgroupAssignArgs{})]struct{}
	_ [unsafe.Sizeof(qgroupAssignArgs{}) - 24]struct{}
	_ [16 - unsafe.Sizeof(qgroupCreateArgs{})]struct{}
	_ [unsafe.Sizeof(qgroupCreateArgs{}) - 16]struct{}
	_ [48 - unsafe.Sizeof(qgroupLimitArgs{})]struct{}
	_ [unsafe.Sizeof(qgroupLimitArgs{}) - 48]struct{}
	_ [80 - unsafe.Sizeof(qgroupInherit{})]struct{}
	_ [unsafe.Sizeof(qgroupInherit{}) - 80]struct{}
	_ [104 - unsafe.Sizeof(searchKey{})]struct{}
	_ [unsafe.Sizeof(searchKey{}) - 104]struct{}
	_ [4096 - unsafe.Sizeof(searchArgs{})]struct{}
	_ [unsafe.Sizeof(searchArgs{}) - 4096]struct{}
)

// snapCreateInGroup is snapCreate that also makes the new subvolume's own
// qgroup a member of qgroup (0: no group), in the same transaction, so the
// snapshot is charged to the group from its first byte.
func snapCreateInGroup(srcFd, dirFd int, name string, readOnly bool, qgroup uint64) error {
	if qgroup == 0 {
		return snapCreate(srcFd, dirFd, name, readOnly)
	}
	inherit := &qgroupInherit{NumQgroups: 1, Qgroups: [1]uint64{qgroup}}
	var a volArgsV2
	a.Fd = int64(srcFd)
	a.Flags = subvolQgroupInherit
	if readOnly {
		a.Flags |= subvolRdonly
	}
	// The union after flags holds {size, pointer to the inherit struct}.
	// The pointer is hidden from the garbage collector in an integer:
	// pin the struct until the kernel has copied it.
	var pin runtime.Pinner
	pin.Pin(inherit)
	defer pin.Unpin()
	a.Unused[0] = uint64(unsafe.Sizeof(*inherit))
	a.Unused[1] = uint64(uintptr(unsafe.Pointer(inherit)))
	if err := setName(a.Name[:], name); err != nil {
		return err
	}
	return ioctl(dirFd, iocSnapCreateV2, unsafe.Pointer(&a))
}

// qgroupCreate creates (or, with create false, destroys) a qgroup. fd is
// any file on the filesystem.
func qgroupCreate(fd int, qgroup uint64, create bool) error {
	a := qgroupCreateArgs{QgroupID: qgroup}
	if create {
		a.Create = 1
	}
	return ioctl(fd, iocQgroupCreate, unsafe.Pointer(&a))
}

// qgroupAssign makes member a member of parent.
func qgroupAssign(fd int, member, parent uint64) error {
	a := qgroupAssignArgs{Assign: 1, Src: member, Dst: parent}
	return ioctl(fd, iocQgroupAssign, unsafe.Pointer(&a))
}

// qgroupUnassign removes the relation member → parent.
func qgroupUnassign(fd int, member, parent uint64) error {
	a := qgroupAssignArgs{Assign: 0, Src: member, Dst: parent}
	return ioctl(fd, iocQgroupAssign, unsafe.Pointer(&a))
}

// qgroupSetMaxExcl caps the exclusive bytes of qgroup (0: no cap) and
// clears any cap on referenced bytes, so exactly one limit is in force.
func qgroupSetMaxExcl(fd int, qgroup, maxExcl uint64) error {
	a := qgroupLimitArgs{QgroupID: qgroup}
	a.Lim.Flags = qgroupLimitMaxRfer | qgroupLimitMaxExcl
	a.Lim.MaxRfer = qgroupLimitClear
	a.Lim.MaxExcl = maxExcl
	if maxExcl == 0 {
		a.Lim.MaxExcl = qgroupLimitClear
	}
	return ioctl(fd, iocQgroupLimit, unsafe.Pointer(&a))
}

// searchOffsets returns the offsets of every item (objectID, typ, *) in the
// tree treeID, as they stand in memory (committed or not). Only root may
// search trees.
func searchOffsets(fd int, treeID, objectID uint64, typ uint32) ([]uint64, error) {
	var out []uint64
	var a searchArgs
	minOffset := uint64(0)
	for {
		a.Key = searchKey{
			TreeID:      treeID,
			MinObjectID: objectID,
			MaxObjectID: objectID,
			MinType:     typ,
			MaxType:     typ,
			MinOffset:   minOffset,
			MaxOffset:   ^uint64(0),
			MaxTransid:  ^uint64(0),
			NrItems:     ^uint32(0),
		}
		if err := ioctl(fd, iocTreeSearch, unsafe.Pointer(&a)); err != nil {
			return nil, err
		}
		if a.Key.NrItems == 0 {
			return out, nil
		}
		var last uint64
		buf := a.Buf[:]
		for range a.Key.NrItems {
			if len(buf) < searchHeaderSize {
				break
			}
			// The header is in host byte order (it is a C struct).
			offset := binary.NativeEndian.Uint64(buf[16:24])
			itemType := binary.NativeEndian.Uint32(buf[24:28])
			length := binary.NativeEndian.Uint32(buf[28:32])
			if itemType == typ {
				out = append(out, offset)
			}
			last = offset
			if uint64(len(buf)) < searchHeaderSize+uint64(length) {
				break
			}
			buf = buf[searchHeaderSize+length:]
		}
		if last == ^uint64(0) {
			return out, nil
		}
		minOffset = last + 1
	}
}
