package network

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// UplinkShareDir is where daemons whose networks share a namespace (and so
// an uplink) agree on the uplink's forwarding switch. Unlike the bridge's,
// that switch is not one daemon's: the first daemon to need it turns it
// on, and it must stay on until the last one leaves, else removing one
// daemon cuts the others' sandboxes off. It is host-wide on purpose, and
// on /run because the switches do not survive a reboot either.
const UplinkShareDir = "/run/warren/uplinks"

// uplinkShare is one uplink's entry in UplinkShareDir: a directory per
// namespace and uplink, holding one file per daemon whose record says it
// turned (or inherited) the switch on, naming that daemon's run directory.
// A holder whose run directory no longer records the switch is gone (its
// run directory was removed, or a reboot cleared it) and is pruned.
type uplinkShare struct {
	dir    string // <UplinkShareDir>/<netns dev>-<netns inode>-<uplink>
	self   string // this daemon's run directory
	uplink string
}

// share returns the uplink's entry, or nil when the namespace cannot be
// identified (then the switch is this daemon's alone, as before sharing).
func (f *forwarder) share() *uplinkShare {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.ns), &st); err != nil {
		f.log.Warn("network: cannot identify the namespace to share the uplink's forwarding with other daemons", "err", err)
		return nil
	}
	return &uplinkShare{dir: filepath.Join(UplinkShareDir, fmt.Sprintf("%d-%d-%s", st.Dev, st.Ino, f.uplink)), self: f.runDir, uplink: f.uplink}
}

// locked runs fn holding the entry's lock, which serializes the daemons'
// decisions about the switch.
func (s *uplinkShare) locked(fn func() error) error {
	for {
		lf, err := s.lock()
		if err != nil {
			return err
		}
		if lf == nil {
			continue // the entry was removed while we waited: lock the new one
		}
		defer lf.Close() // closing releases the lock
		return fn()
	}
}

// lock opens and locks the entry's lock file; nil when the file it locked
// is no longer the entry's (the last holder removed the entry meanwhile).
func (s *uplinkShare) lock() (*os.File, error) {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	path := filepath.Join(s.dir, ".lock")
	lf, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // the directory went between MkdirAll and here
	}
	if err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX); err != nil {
		lf.Close()
		return nil, fmt.Errorf("network: lock %s: %w", path, err)
	}
	var held, now unix.Stat_t
	if unix.Fstat(int(lf.Fd()), &held) != nil || unix.Stat(path, &now) != nil || held.Ino != now.Ino {
		lf.Close()
		return nil, nil
	}
	return lf, nil
}

func (s *uplinkShare) holderFile(runDir string) string {
	sum := sha256.Sum256([]byte(runDir))
	return filepath.Join(s.dir, hex.EncodeToString(sum[:8]))
}

// join registers this daemon as a holder (lock held).
func (s *uplinkShare) join() error {
	if err := os.WriteFile(s.holderFile(s.self), []byte(s.self), 0o600); err != nil {
		return fmt.Errorf("network: register for the uplink's forwarding: %w", err)
	}
	return nil
}

// leave unregisters this daemon, and removes the entry once nobody holds it
// (lock held; the lock file goes with the entry).
func (s *uplinkShare) leave() error {
	if err := os.Remove(s.holderFile(s.self)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("network: unregister from the uplink's forwarding: %w", err)
	}
	return nil
}

// others returns the value the uplink's switch had before the first
// holder other than this daemon turned it on, and whether there is such a
// holder still alive (lock held). Dead holders are pruned.
func (s *uplinkShare) others() (before string, alive bool) {
	entries, _ := os.ReadDir(s.dir)
	for _, e := range entries {
		if e.Name() == ".lock" {
			continue
		}
		path := filepath.Join(s.dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil || string(b) == s.self {
			continue
		}
		rec, err := (&forwarder{runDir: string(b)}).load()
		was, ok := rec.Changed[s.uplink]
		if err != nil || !ok {
			_ = os.Remove(path)
			continue
		}
		before, alive = was, true
	}
	return before, alive
}

// removeIfUnused removes the entry when no holder is left (lock held).
func (s *uplinkShare) removeIfUnused() {
	entries, _ := os.ReadDir(s.dir)
	if len(entries) == 1 && entries[0].Name() == ".lock" {
		_ = os.Remove(filepath.Join(s.dir, ".lock"))
		_ = os.Remove(s.dir)
	}
}

// sweepUplinkShares removes the entries of UplinkShareDir that no live
// daemon holds: those of namespaces that went away with their daemons'
// run directories (a test's fake host, a daemon removed without
// teardown), which nothing else would ever look at again.
func sweepUplinkShares(log *slog.Logger) {
	entries, _ := os.ReadDir(UplinkShareDir)
	for _, e := range entries {
		parts := strings.SplitN(e.Name(), "-", 3)
		if !e.IsDir() || len(parts) != 3 {
			continue
		}
		s := &uplinkShare{dir: filepath.Join(UplinkShareDir, e.Name()), uplink: parts[2]}
		if err := s.locked(func() error { s.others(); s.removeIfUnused(); return nil }); err != nil {
			log.Debug("network: sweep the uplinks' shared forwarding", "entry", e.Name(), "err", err)
		}
	}
}
