package btrfs

import (
	"encoding/binary"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A snapshot ioctl returns only once its transaction is on disk, but the
// snapshot's content is fixed earlier, inside the commit's critical
// section, when the source's root is copied. Right after the copy the
// kernel links the new subvolume into its directory with a ROOT_REF item in
// the root tree, and a tree search sees that item before the commit is
// written out. A caller that froze the source's writers can thaw them then:
// whatever they write next lands after the copy. The rest of the commit
// (writing the transaction's blocks and the superblock) then happens with
// the sandbox running.

const (
	keyRootRef = 156 // BTRFS_ROOT_REF_KEY: (parent tree, ROOT_REF, child tree)
	// rootRefLen is sizeof(struct btrfs_root_ref): dirid, sequence, name_len.
	rootRefLen = 18
	// takenPoll is the pause between two searches for the ROOT_REF; a
	// search costs a few microseconds.
	takenPoll = 100 * time.Microsecond
)

// smallSearchArgs is struct btrfs_ioctl_search_args_v2 with a buffer for a
// few items: the watch expects one or two.
type smallSearchArgs struct {
	Key     searchKey
	BufSize uint64
	Buf     [4096]byte
}

// rootRefWatch looks for the ROOT_REF that links a new subvolume named name
// into directory dirIno of tree parentTree. New subvolume ids only grow
// while the filesystem is mounted, so the search starts above floor (the
// highest id known to exist before the snapshot) and stays short.
type rootRefWatch struct {
	fd         int
	parentTree uint64
	dirIno     uint64
	floor      uint64
	name       string
	args       smallSearchArgs
	id         uint64 // the new subvolume's, once found
}

// found reports whether the ROOT_REF is there, and the new subvolume's id.
// An error (an old kernel, say) means the watch cannot tell.
func (w *rootRefWatch) found() (uint64, bool, error) {
	a := &w.args
	k := &a.Key
	*k = searchKey{
		TreeID:      treeRoot,
		MinObjectID: w.parentTree, MaxObjectID: w.parentTree,
		MinType: keyRootRef, MaxType: keyRootRef,
		MinOffset: w.floor + 1, MaxOffset: ^uint64(0),
		MaxTransid: ^uint64(0),
	}
	for {
		k.NrItems = ^uint32(0)
		a.BufSize = uint64(len(a.Buf))
		if err := ioctl(w.fd, iocTreeSearchV2, unsafe.Pointer(a)); err != nil {
			return 0, false, err
		}
		if k.NrItems == 0 {
			return 0, false, nil
		}
		var id uint64
		last, more, err := eachSearchItem(a.Buf[:], k.NrItems, func(it treeItem) bool {
			if w.links(it) {
				id = it.offset
				return false
			}
			return true
		})
		if err != nil || id != 0 {
			return id, id != 0, err
		}
		if !more || !k.advance(last) {
			return 0, false, nil
		}
	}
}

// links reports whether it is the ROOT_REF the watch looks for.
func (w *rootRefWatch) links(it treeItem) bool {
	d := it.data
	if it.objectid != w.parentTree || it.typ != keyRootRef || len(d) < rootRefLen {
		return false
	}
	nameLen := int(binary.LittleEndian.Uint16(d[16:]))
	return binary.LittleEndian.Uint64(d) == w.dirIno && rootRefLen+nameLen <= len(d) &&
		string(d[rootRefLen:rootRefLen+nameLen]) == w.name
}

// watchTaken calls taken once the ROOT_REF of the snapshot appears, or
// never if done closes first or the watch cannot tell. It returns a channel
// closed when it has stopped (and taken, if called, has returned).
func watchTaken(w *rootRefWatch, taken func(), done <-chan struct{}) <-chan struct{} {
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTimer(takenPoll)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if id, ok, err := w.found(); err != nil {
				return
			} else if ok {
				w.id = id
				taken()
				return
			}
			t.Reset(takenPoll)
		}
	}()
	return stopped
}

// raiseTo records id as known to exist when it is the highest seen.
func raiseTo(v *atomic.Uint64, id uint64) {
	for {
		cur := v.Load()
		if id <= cur || v.CompareAndSwap(cur, id) {
			return
		}
	}
}

// dirInode returns the inode number of the open directory fd.
func dirInode(fd int) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}
