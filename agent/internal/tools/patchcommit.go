package tools

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/warrenhq/warren/agent/internal/fsops"
)

// commit writes the overlay's changes so that they all happen or none
// does. Every new content is first written to a temporary file beside its
// target (parents created as needed); only when all are written are they
// swapped in, each original kept as a hard-linked backup until the last
// swap succeeded. Any failure puts the backups back and removes what was
// made.
func (o *overlay) commit() error {
	type change struct {
		f       *ofile
		tmp     string   // new content staged, "" for a deletion
		dirs    []string // parents created for it
		backup  string   // hard link to the original, once taken
		swapped bool
	}
	var changes []*change
	undo := func() {
		for i := len(changes) - 1; i >= 0; i-- {
			ch := changes[i]
			switch {
			case ch.backup != "" && ch.swapped:
				_ = os.Rename(ch.backup, ch.f.path) // the original comes back
			case ch.backup != "":
				_ = os.Remove(ch.backup) // the original is still in place
			case ch.swapped:
				_ = os.Remove(ch.f.path) // a file the patch created
			}
			if ch.tmp != "" && !ch.swapped {
				_ = os.Remove(ch.tmp)
			}
			fsops.RemoveDirs(ch.dirs)
		}
	}
	for _, f := range o.order {
		if !f.changed || (!f.exists && !f.existed) {
			continue
		}
		ch := &change{f: f}
		changes = append(changes, ch)
		if !f.exists {
			continue
		}
		uid, gid := o.c.owner()
		dirs, err := mkdirParents(f.path, uid, gid)
		if err != nil {
			undo()
			return errors.New(errText("create the parents of", f.path, err))
		}
		ch.dirs = dirs
		if ch.tmp, err = stage(f.path, f.content(), f.mode, f.uid, f.gid, f.xattrsFrom); err != nil {
			undo()
			return errors.New(errText("write", f.path, err))
		}
	}
	for _, ch := range changes {
		if ch.f.existed {
			b, err := linkBackup(ch.f.path)
			if err != nil {
				undo()
				return errors.New(errText("back up", ch.f.path, err))
			}
			ch.backup = b
		}
		var err error
		if ch.tmp != "" {
			err = os.Rename(ch.tmp, ch.f.path)
		} else {
			err = os.Remove(ch.f.path)
		}
		if err != nil {
			undo()
			return errors.New(errText("replace", ch.f.path, err))
		}
		ch.swapped = true
	}
	for _, ch := range changes {
		if ch.backup != "" {
			_ = os.Remove(ch.backup)
		}
	}
	return nil
}

// linkBackup hard-links path under a fresh temporary name beside it.
func linkBackup(path string) (string, error) {
	for range 10 {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		name := filepath.Join(filepath.Dir(path), tempPrefix+"bak-"+hex.EncodeToString(b))
		err := os.Link(path, name)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("no free backup name beside %s", path)
}
