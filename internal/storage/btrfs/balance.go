package btrfs

import (
	"unsafe"
)

// Converting a new pool's metadata from DUP to single.
//
// Every turn snapshot commits a transaction whose cost is mostly metadata
// writes (the first write to a tree shared with a snapshot copies its path
// and bumps the references of every child), and DUP writes each block
// twice: a turn of 25 files in a 100k-file tree committed in 18 ms with DUP
// and 11 ms with single. mkfs -m single is not used because it starts
// metadata at 8 MiB: a pool that data then filled left metadata no room to
// grow, and deletes failed with ENOSPC. Converting after mkfs instead
// relocates metadata into one chunk sized by the kernel's own rule (up to
// 10 % of the pool, at most 256 MiB): 112 MiB of a 1 GiB pool, 256 MiB of a
// 20 GiB one — as much usable room as DUP's chunk, or more.
const (
	iocBalanceV2 = 0xc4009420 // _IOWR(0x94, 32, struct btrfs_ioctl_balance_args)

	balanceSystem   = 1 << 1 // BTRFS_BALANCE_SYSTEM
	balanceMetadata = 1 << 2 // BTRFS_BALANCE_METADATA
	// balanceForce is needed to lower metadata's redundancy.
	balanceForce = 1 << 3 // BTRFS_BALANCE_FORCE

	balanceArgsConvert = 1 << 8  // BTRFS_BALANCE_ARGS_CONVERT
	profileSingle      = 1 << 48 // BTRFS_AVAIL_ALLOC_BIT_SINGLE
)

// balanceArgs is struct btrfs_balance_args (136 bytes, packed); the unions
// are flattened to their u64 form.
type balanceArgs struct {
	Profiles   uint64
	Usage      uint64
	Devid      uint64
	Pstart     uint64
	Pend       uint64
	Vstart     uint64
	Vend       uint64
	Target     uint64
	Flags      uint64
	Limit      uint64
	StripesMin uint32
	StripesMax uint32
	_          [6]uint64
}

// ioctlBalanceArgs is struct btrfs_ioctl_balance_args (1024 bytes).
type ioctlBalanceArgs struct {
	Flags uint64
	State uint64
	Data  balanceArgs
	Meta  balanceArgs
	Sys   balanceArgs
	Stat  [3]uint64
	_     [72]uint64
}

var (
	_ [136 - unsafe.Sizeof(balanceArgs{})]struct{}
	_ [unsafe.Sizeof(balanceArgs{}) - 136]struct{}
	_ [1024 - unsafe.Sizeof(ioctlBalanceArgs{})]struct{}
	_ [unsafe.Sizeof(ioctlBalanceArgs{}) - 1024]struct{}
)

// convertMetadataSingle rewrites the metadata and system chunks of the
// filesystem fd is on with the single profile. On a new pool there is
// almost nothing to move, so it takes milliseconds.
func convertMetadataSingle(fd int) error {
	args := ioctlBalanceArgs{Flags: balanceMetadata | balanceSystem | balanceForce}
	args.Meta.Flags = balanceArgsConvert
	args.Meta.Target = profileSingle
	args.Sys = args.Meta
	return ioctl(fd, iocBalanceV2, unsafe.Pointer(&args))
}
