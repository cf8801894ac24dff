package btrfs

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The btrfs ioctls warren uses, from linux/btrfs.h. They are issued directly
// rather than through btrfs-progs: a snapshot or delete is one syscall (the
// progs walk or fork; containerd's helper walks whole trees on delete).
const (
	iocSubvolCreate   = 0x5000940e // _IOW(0x94, 14, struct btrfs_ioctl_vol_args)
	iocSnapDestroy    = 0x5000940f // _IOW(0x94, 15, struct btrfs_ioctl_vol_args)
	iocInoLookup      = 0xd0009412 // _IOWR(0x94, 18, struct btrfs_ioctl_ino_lookup_args)
	iocSnapCreateV2   = 0x50009417 // _IOW(0x94, 23, struct btrfs_ioctl_vol_args_v2)
	iocSubvolGetflags = 0x80089419 // _IOR(0x94, 25, __u64)
	iocSubvolSetflags = 0x4008941a // _IOW(0x94, 26, __u64)
	iocFsInfo         = 0x8400941f // _IOR(0x94, 31, struct btrfs_ioctl_fs_info_args)
	iocQuotaCtl       = 0xc0109428 // _IOWR(0x94, 40, struct btrfs_ioctl_quota_ctl_args)
	iocSetReceived    = 0xc0c89425 // _IOWR(0x94, 37, struct btrfs_ioctl_received_subvol_args)
	iocSend           = 0x40489426 // _IOW(0x94, 38, struct btrfs_ioctl_send_args)

	subvolRdonly = 1 << 1 // BTRFS_SUBVOL_RDONLY

	quotaCtlEnableSimple = 4 // BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA

	// firstFreeObjectID is the inode number of every subvolume's root
	// directory (BTRFS_FIRST_FREE_OBJECTID); it is how a subvolume is told
	// apart from a plain directory.
	firstFreeObjectID = 256
)

// volArgs is struct btrfs_ioctl_vol_args (4096 bytes).
type volArgs struct {
	Fd   int64
	Name [4088]byte
}

// volArgsV2 is struct btrfs_ioctl_vol_args_v2 (4096 bytes); the unions are
// flattened to the members warren uses.
type volArgsV2 struct {
	Fd      int64
	Transid uint64
	Flags   uint64
	Unused  [4]uint64
	Name    [4040]byte
}

// inoLookupArgs is struct btrfs_ioctl_ino_lookup_args (4096 bytes).
type inoLookupArgs struct {
	TreeID   uint64
	ObjectID uint64
	Name     [4080]byte
}

// fsInfoArgs is struct btrfs_ioctl_fs_info_args (1024 bytes).
type fsInfoArgs struct {
	MaxID          uint64
	NumDevices     uint64
	Fsid           [16]byte
	NodeSize       uint32
	SectorSize     uint32
	CloneAlignment uint32
	CsumType       uint16
	CsumSize       uint16
	Flags          uint64
	Generation     uint64
	MetadataUUID   [16]byte
	Reserved       [944]byte
}

// quotaCtlArgs is struct btrfs_ioctl_quota_ctl_args.
type quotaCtlArgs struct {
	Cmd    uint64
	Status uint64
}

// receivedSubvolArgs is struct btrfs_ioctl_received_subvol_args (200 bytes).
type receivedSubvolArgs struct {
	UUID     subvolUUID
	Stransid uint64
	Rtransid uint64
	Stime    ioctlTimespec
	Rtime    ioctlTimespec
	Flags    uint64
	Reserved [16]uint64
}

// Compile-time size checks: a wrong layout would make the kernel read garbage.
var (
	_ [4096 - unsafe.Sizeof(volArgs{})]struct{}
	_ [unsafe.Sizeof(volArgs{}) - 4096]struct{}
	_ [4096 - unsafe.Sizeof(volArgsV2{})]struct{}
	_ [unsafe.Sizeof(volArgsV2{}) - 4096]struct{}
	_ [4096 - unsafe.Sizeof(inoLookupArgs{})]struct{}
	_ [unsafe.Sizeof(inoLookupArgs{}) - 4096]struct{}
	_ [1024 - unsafe.Sizeof(fsInfoArgs{})]struct{}
	_ [unsafe.Sizeof(fsInfoArgs{}) - 1024]struct{}
	_ [200 - unsafe.Sizeof(receivedSubvolArgs{})]struct{}
	_ [unsafe.Sizeof(receivedSubvolArgs{}) - 200]struct{}
)

func ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg))
	if errno != 0 {
		return errno
	}
	return nil
}

func setName(dst []byte, name string) error {
	if len(name) >= len(dst) || len(name) == 0 {
		return fmt.Errorf("subvolume name %q: bad length", name)
	}
	copy(dst, name)
	return nil
}

// subvolCreate makes an empty subvolume name inside the directory dirFd.
func subvolCreate(dirFd int, name string) error {
	var a volArgs
	if err := setName(a.Name[:], name); err != nil {
		return err
	}
	return ioctl(dirFd, iocSubvolCreate, unsafe.Pointer(&a))
}

// snapCreate makes name inside dirFd a snapshot of the subvolume srcFd.
func snapCreate(srcFd, dirFd int, name string, readOnly bool) error {
	var a volArgsV2
	a.Fd = int64(srcFd)
	if readOnly {
		a.Flags = subvolRdonly
	}
	if err := setName(a.Name[:], name); err != nil {
		return err
	}
	return ioctl(dirFd, iocSnapCreateV2, unsafe.Pointer(&a))
}

// snapDestroy deletes the subvolume name inside dirFd. As root (the only way
// warren runs) it works on read-only subvolumes too; the kernel refuses only
// when the subvolume holds nested subvolumes (ENOTEMPTY).
func snapDestroy(dirFd int, name string) error {
	var a volArgs
	if err := setName(a.Name[:], name); err != nil {
		return err
	}
	return ioctl(dirFd, iocSnapDestroy, unsafe.Pointer(&a))
}

func subvolGetFlags(fd int) (uint64, error) {
	var flags uint64
	err := ioctl(fd, iocSubvolGetflags, unsafe.Pointer(&flags))
	return flags, err
}

func subvolSetFlags(fd int, flags uint64) error {
	return ioctl(fd, iocSubvolSetflags, unsafe.Pointer(&flags))
}

// subvolID returns the id of the subvolume that holds the open file fd.
func subvolID(fd int) (uint64, error) {
	a := inoLookupArgs{ObjectID: firstFreeObjectID}
	if err := ioctl(fd, iocInoLookup, unsafe.Pointer(&a)); err != nil {
		return 0, err
	}
	return a.TreeID, nil
}

// fsUUID returns the filesystem's uuid as sysfs spells it under /sys/fs/btrfs.
func fsUUID(fd int) (string, error) {
	var a fsInfoArgs
	if err := ioctl(fd, iocFsInfo, unsafe.Pointer(&a)); err != nil {
		return "", err
	}
	u := a.Fsid
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
}

// enableSimpleQuota turns on btrfs simple quotas for the filesystem of fd.
func enableSimpleQuota(fd int) error {
	a := quotaCtlArgs{Cmd: quotaCtlEnableSimple}
	return ioctl(fd, iocQuotaCtl, unsafe.Pointer(&a))
}

// setReceived records on the writable subvolume at fd that it is the
// volume sent as uuid at transaction stransid, as `btrfs receive` does: a
// later stream that is a delta against that volume finds it by this UUID.
// Read-only snapshots of it keep the mark.
func setReceived(fd int, uuid subvolUUID, stransid uint64) error {
	a := receivedSubvolArgs{UUID: uuid, Stransid: stransid}
	return ioctl(fd, iocSetReceived, unsafe.Pointer(&a))
}

// sendArgs is struct btrfs_ioctl_send_args (72 bytes).
type sendArgs struct {
	SendFd            int64
	CloneSourcesCount uint64
	CloneSources      uint64 // pointer to an array of subvolume ids
	ParentRoot        uint64
	Flags             uint64
	Version           uint32
	_                 [28]byte
}

// sendDelta writes to out a version 1 send stream of the read-only
// subvolume at fd as a delta against the read-only subvolume parentID,
// which is also the one clone source (as `btrfs send -p` does); parentID 0
// sends the whole subvolume (`btrfs send` alone).
func sendDelta(fd int, parentID uint64, out *os.File) error {
	a := sendArgs{SendFd: int64(out.Fd())}
	if parentID != 0 {
		sources := []uint64{parentID}
		var pin runtime.Pinner
		pin.Pin(&sources[0])
		defer pin.Unpin()
		a.CloneSourcesCount = 1
		a.CloneSources = uint64(uintptr(unsafe.Pointer(&sources[0])))
		a.ParentRoot = parentID
	}
	return sendUninterrupted(fd, &a)
}

// sendUninterrupted issues the send ioctl from a thread that blocks every
// signal. A signal arriving while the send waits on a full pipe aborts it
// (ERESTARTSYS), and the SA_RESTART of Go's handlers then reruns it from the
// start: the stream begins again after what was already written, and under
// a steady signal (the CPU profiler's SIGPROF, the runtime's SIGURG) it never
// ends — 48 GB from a 1 GiB volume was seen. The thread stays locked, so it
// exits with its mask when the goroutine ends.
func sendUninterrupted(fd int, a *sendArgs) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		var all unix.Sigset_t
		for i := range all.Val {
			all.Val[i] = ^uint64(0)
		}
		if err := unix.PthreadSigmask(unix.SIG_BLOCK, &all, nil); err != nil {
			done <- fmt.Errorf("block signals for the send: %w", err)
			return
		}
		done <- ioctl(fd, iocSend, unsafe.Pointer(a))
	}()
	return <-done
}
