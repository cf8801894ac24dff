package btrfs

import "encoding/binary"

// maxLineage bounds how many snapshot generations planDiff climbs.
const maxLineage = 64

// diffPlan says how two volumes may be diffed.
type diffPlan struct {
	// fast: every inode of `to` whose item is from transaction threshold
	// or before is an inode `from` holds unchanged (provided `from` has
	// not itself been written since threshold, which fastDiff checks).
	fast      bool
	threshold uint64
	// related: the volumes share an ancestor, so their inode numbers name
	// the same files and a walk may compare them.
	related bool
}

// planDiff places from and to in their snapshot lineage.
//
// btrfs copies a subvolume's tree when it snapshots it, and every later
// write stamps the items it rewrites with the writing transaction. Climb
// to's ancestry (each volume was snapshotted from its parent at its
// otransid). Two cases let the diff skip everything older than a
// transaction T:
//
//   - from is an ancestor of to, and C is the ancestor (or to itself)
//     snapshotted from it: everything in to stamped T = C.otransid or
//     earlier was copied, unchanged, from from.
//   - from and an ancestor C of to (or to itself, or to is that parent)
//     were snapshotted from the same volume L, from first: everything in
//     to stamped T = from.otransid or earlier was in L at T, hence in from.
//
// Rollbacks and forks fit the first case; turns of one sandbox the second.
func planDiff(fd int, from, to diffSubvol) diffPlan {
	// A restored volume (marked received: see Restore) is a snapshot of
	// its chain's base with the streams replayed on it: the files they
	// wrote have new inode numbers and ctimes, so the edge to its parent
	// does not keep inodes comparable. Lineage walks stop at one.
	if to.uuid == from.parentUUID && from.received.zero() {
		return diffPlan{fast: true, threshold: from.otransid, related: true}
	}
	toAncestry := map[subvolUUID]bool{to.uuid: true}
	cur := to
	for i := 0; i < maxLineage; i++ {
		if !cur.received.zero() {
			break
		}
		pu := cur.parentUUID
		if pu.zero() || toAncestry[pu] {
			break
		}
		if pu == from.uuid {
			return diffPlan{fast: true, threshold: cur.otransid, related: true}
		}
		if pu == from.parentUUID && from.received.zero() {
			if from.otransid <= cur.otransid {
				return diffPlan{fast: true, threshold: from.otransid, related: true}
			}
			return diffPlan{related: true} // from was taken after to's branch left L
		}
		toAncestry[pu] = true
		next, ok, err := lookupSubvolByUUID(fd, pu)
		if err != nil || !ok {
			break // deleted (or no privilege): what we know so far
		}
		cur = next
	}
	// Not in to's direct line: related if from's ancestry meets it.
	cur = from
	for i := 0; i < maxLineage; i++ {
		if toAncestry[cur.uuid] {
			return diffPlan{related: true}
		}
		if !cur.received.zero() {
			break
		}
		if toAncestry[cur.parentUUID] {
			return diffPlan{related: true}
		}
		if cur.parentUUID.zero() {
			break
		}
		next, ok, err := lookupSubvolByUUID(fd, cur.parentUUID)
		if err != nil || !ok {
			break
		}
		cur = next
	}
	return diffPlan{}
}

func leUint64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
func leUint32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
