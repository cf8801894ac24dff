package treediff

import (
	"context"
	"fmt"
	"path"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
)

// Comparer compares two trees path by path and collects the changes.
//
// Tree compares whole subtrees (Walk is Tree("/")). Path and Children are
// for a caller that knows which inodes of `to` may have changed (see
// Children for what it must guarantee). Paths are absolute inside the
// trees ("/etc/passwd"). A Comparer is not safe for concurrent use.
type Comparer struct {
	from, to *tree
	opts     Options

	changes []storage.Change
	emitted map[string]uint8 // path -> bitmask of kinds already listed
	covered map[string]bool  // roots of subtrees Tree has fully compared
}

// NewComparer opens both roots; Close releases them.
func NewComparer(fromRoot, toRoot string, opts Options) (*Comparer, error) {
	from, err := openTree(fromRoot)
	if err != nil {
		return nil, err
	}
	to, err := openTree(toRoot)
	if err != nil {
		from.close()
		return nil, err
	}
	return &Comparer{from: from, to: to, opts: opts, emitted: map[string]uint8{}, covered: map[string]bool{}}, nil
}

// Close releases the roots.
func (c *Comparer) Close() error {
	c.from.close()
	c.to.close()
	return nil
}

// Changes returns what was found so far, sorted by path; for one path a
// removal comes before an addition (a type change).
func (c *Comparer) Changes() []storage.Change {
	out := append([]storage.Change{}, c.changes...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return kindRank(out[i].Kind) < kindRank(out[j].Kind)
	})
	return out
}

func kindRank(k storage.ChangeKind) int {
	switch k {
	case storage.ChangeRemoved:
		return 0
	case storage.ChangeModified:
		return 1
	}
	return 2
}

// Covered tells whether p lies in a subtree Tree has already compared, so
// a caller can skip it.
func (c *Comparer) Covered(p string) bool {
	for q := path.Clean(p); ; q = path.Dir(q) {
		if c.covered[q] {
			return true
		}
		if q == "/" {
			return false
		}
	}
}

// Tree compares p and everything below it in both trees.
func (c *Comparer) Tree(ctx context.Context, p string) error {
	p = path.Clean(p)
	if c.Covered(p) {
		return nil
	}
	fe, fparent, err := c.from.lookup(p)
	if err != nil {
		return err
	}
	defer closeFd(fparent)
	te, tparent, err := c.to.lookup(p)
	if err != nil {
		return err
	}
	defer closeFd(tparent)
	c.compare(p, fe, te)
	c.covered[p] = true
	if !fe.isDir() && !te.isDir() {
		return nil
	}
	ffd, err := c.openSide(c.from, fparent, p, fe)
	if err != nil {
		return err
	}
	defer closeFd(ffd)
	tfd, err := c.openSide(c.to, tparent, p, te)
	if err != nil {
		return err
	}
	defer closeFd(tfd)
	return c.descend(ctx, p, ffd, tfd)
}

// openSide opens the directory e found at p (in parent, or the root).
func (c *Comparer) openSide(t *tree, parent int, p string, e *entry) (int, error) {
	if !e.isDir() {
		return -1, nil
	}
	if p == "/" {
		return unix.Dup(t.fd)
	}
	return t.openDirAt(parent, path.Base(p))
}

// descend compares the entries of directory p, open as ffd in `from` and
// tfd in `to` (-1 for a side where p is not a directory), recursively.
func (c *Comparer) descend(ctx context.Context, p string, ffd, tfd int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	fnames, err := listSide(ffd)
	if err != nil {
		return fmt.Errorf("diff %s: %w", p, err)
	}
	tnames, err := listSide(tfd)
	if err != nil {
		return fmt.Errorf("diff %s: %w", p, err)
	}
	for _, name := range union(fnames, tnames) {
		if err := c.child(ctx, p, name, ffd, tfd); err != nil {
			return err
		}
	}
	return nil
}

// child compares name inside directory p and, when either side is a
// directory, everything below it.
func (c *Comparer) child(ctx context.Context, p, name string, ffd, tfd int) error {
	cp := join(p, name)
	var fe, te *entry
	var err error
	if ffd >= 0 {
		if fe, err = c.from.statAt(ffd, name); err != nil {
			return fmt.Errorf("diff %s: %w", cp, err)
		}
	}
	if tfd >= 0 {
		if te, err = c.to.statAt(tfd, name); err != nil {
			return fmt.Errorf("diff %s: %w", cp, err)
		}
	}
	c.compare(cp, fe, te)
	if !fe.isDir() && !te.isDir() {
		return nil
	}
	cf, ct := -1, -1
	if fe.isDir() {
		if cf, err = c.from.openDirAt(ffd, name); err != nil {
			return fmt.Errorf("diff %s: %w", cp, err)
		}
		defer closeFd(cf)
	}
	if te.isDir() {
		if ct, err = c.to.openDirAt(tfd, name); err != nil {
			return fmt.Errorf("diff %s: %w", cp, err)
		}
		defer closeFd(ct)
	}
	return c.descend(ctx, cp, cf, ct)
}

// Path compares p alone: it lists p's own change, without looking below
// it even when it was added or removed.
func (c *Comparer) Path(ctx context.Context, p string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p = path.Clean(p)
	if c.Covered(p) {
		return nil
	}
	fe, fparent, err := c.from.lookup(p)
	if err != nil {
		return err
	}
	closeFd(fparent)
	te, tparent, err := c.to.lookup(p)
	if err != nil {
		return err
	}
	closeFd(tparent)
	c.compare(p, fe, te)
	return nil
}

// Children compares the names of directory p in both trees: a name on one
// side only, or naming different inodes on the two sides, is compared with
// Tree; a name with the same inode number on both sides is left alone.
//
// That is sound only with Options.SameInodes and when the caller calls Path
// (and, for directories, Children) for every path of every inode of `to`
// that may differ from the inode of the same number in `from`, including
// every directory whose entries changed. The btrfs backend knows that set
// from transaction ids.
func (c *Comparer) Children(ctx context.Context, p string) error {
	if !c.opts.SameInodes {
		return fmt.Errorf("diff: Children needs SameInodes: %w", errdefs.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p = path.Clean(p)
	if c.Covered(p) {
		return nil
	}
	ffd, err := c.from.openDir(p)
	if err != nil {
		return err
	}
	defer closeFd(ffd)
	tfd, err := c.to.openDir(p)
	if err != nil {
		return err
	}
	defer closeFd(tfd)
	if ffd < 0 || tfd < 0 {
		return nil // not a directory on both sides: Tree of an ancestor's Children handles it
	}
	fnames, err := readDir(ffd)
	if err != nil {
		return fmt.Errorf("diff %s: %w", p, err)
	}
	tnames, err := readDir(tfd)
	if err != nil {
		return fmt.Errorf("diff %s: %w", p, err)
	}
	for _, name := range union(fnames, tnames) {
		fino, inFrom := fnames[name]
		tino, inTo := tnames[name]
		if inFrom && inTo && fino == tino {
			continue
		}
		cp := join(p, name)
		if err := c.child(ctx, p, name, ffd, tfd); err != nil {
			return err
		}
		c.covered[cp] = true
	}
	return nil
}

// compare lists p's own change given its entries in both trees (nil where
// absent).
func (c *Comparer) compare(p string, fe, te *entry) {
	switch {
	case fe == nil && te == nil:
	case fe == nil:
		c.emit(storage.Change{Path: p, Kind: storage.ChangeAdded, Type: te.typ(), Size: te.size(), Mode: te.mode()})
	case te == nil:
		c.emit(storage.Change{Path: p, Kind: storage.ChangeRemoved, Type: fe.typ(), OldSize: fe.size(), OldMode: fe.mode()})
	case fe.typ() != te.typ():
		c.emit(storage.Change{Path: p, Kind: storage.ChangeRemoved, Type: fe.typ(), OldSize: fe.size(), OldMode: fe.mode()})
		c.emit(storage.Change{Path: p, Kind: storage.ChangeAdded, Type: te.typ(), Size: te.size(), Mode: te.mode()})
	case !c.same(fe, te):
		c.emit(storage.Change{Path: p, Kind: storage.ChangeModified, Type: te.typ(),
			Size: te.size(), Mode: te.mode(), OldSize: fe.size(), OldMode: fe.mode()})
	}
}

// same applies the package's rule (see the package comment) to two
// entries of one type.
func (c *Comparer) same(a, b *entry) bool {
	x, y := &a.st, &b.st
	if x.Mode != y.Mode || x.Uid != y.Uid || x.Gid != y.Gid || x.Mtim != y.Mtim {
		return false
	}
	if !a.isDir() && x.Size != y.Size {
		return false
	}
	if a.target != b.target || (a.typ() == "other" && x.Rdev != y.Rdev) {
		return false
	}
	if c.opts.SameInodes && (x.Ino != y.Ino || x.Ctim != y.Ctim) {
		return false
	}
	return true
}

func (c *Comparer) emit(ch storage.Change) {
	bit := uint8(1) << kindRank(ch.Kind)
	if c.emitted[ch.Path]&bit != 0 {
		return
	}
	c.emitted[ch.Path] |= bit
	c.changes = append(c.changes, ch)
}

func listSide(fd int) (map[string]uint64, error) {
	if fd < 0 {
		return nil, nil
	}
	return readDir(fd)
}

// union returns the names of both maps, sorted.
func union(a, b map[string]uint64) []string {
	out := make([]string, 0, len(a)+len(b))
	for n := range a {
		out = append(out, n)
	}
	for n := range b {
		if _, ok := a[n]; !ok {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func closeFd(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}
