package network

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/vishvananda/netns"
)

// forwardingFile records the interfaces whose forwarding warren switched on,
// with their value before, across daemon restarts.
const forwardingFile = "forwarding.json"

type forwardingRecord struct {
	// Changed maps an interface to its forwarding value before warren set it.
	Changed map[string]string `json:"changed"`
}

// forwarder switches IPv4 forwarding on for the bridge and the uplink and
// back off, keeping the record in RunDir.
type forwarder struct {
	runDir string
	ns     netns.NsHandle // the host namespace, whose sysctls these are
	bridge string
	uplink string
	log    *slog.Logger
}

func forwardingSysctl(iface string) string {
	return "net/ipv4/conf/" + iface + "/forwarding"
}

func (f *forwarder) load() (forwardingRecord, error) {
	rec := forwardingRecord{Changed: map[string]string{}}
	b, err := os.ReadFile(filepath.Join(f.runDir, forwardingFile))
	if errors.Is(err, os.ErrNotExist) {
		return rec, nil
	}
	if err != nil {
		return rec, fmt.Errorf("read forwarding record: %w", err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("parse %s: %w", forwardingFile, err)
	}
	if rec.Changed == nil {
		rec.Changed = map[string]string{}
	}
	return rec, nil
}

func (f *forwarder) save(rec forwardingRecord) error {
	path := filepath.Join(f.runDir, forwardingFile)
	if len(rec.Changed) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// uplinkIsOurs reports whether forwarding on the uplink is, or is
// about to be, warren's doing: it is off now, or an earlier run recorded
// turning it on, or another daemon sharing the namespace did.
func (f *forwarder) uplinkIsOurs() (bool, error) {
	rec, err := f.load()
	if err != nil {
		return false, err
	}
	if _, ok := rec.Changed[f.uplink]; ok {
		return true, nil
	}
	if s := f.share(); s != nil {
		var sibling bool
		if err := s.locked(func() error { _, sibling = s.others(); return nil }); err != nil {
			return false, err
		}
		if sibling {
			return true, nil
		}
	}
	cur, err := f.read(f.uplink)
	if err != nil {
		return false, fmt.Errorf("network: %w", err)
	}
	return cur != "1", nil
}

func (f *forwarder) read(iface string) (cur string, err error) {
	err = inNetNS(f.ns, func() (err error) {
		cur, err = readSysctl(forwardingSysctl(iface))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("read forwarding of %s: %w", iface, err)
	}
	return cur, nil
}

// enable turns on IPv4 forwarding on the bridge and the uplink
// only, recording each switch it flips. On a bridge it just created it also
// turns IPv6 off: sandboxes have none, and the bridge would otherwise take a
// link-local address and answer neighbour discovery.
func (f *forwarder) enable(createdBridge bool) error {
	sweepUplinkShares(f.log)
	s := f.share()
	if s == nil {
		return f.enableLocked(createdBridge, nil)
	}
	return s.locked(func() error { return f.enableLocked(createdBridge, s) })
}

// enableLocked is enable under the uplink entry's lock (s nil: unshared).
// When another daemon turned the uplink's switch on, this one inherits its
// record of the value before, so that whichever of them leaves last puts
// it back.
func (f *forwarder) enableLocked(createdBridge bool, s *uplinkShare) error {
	rec, err := f.load()
	if err != nil {
		return err
	}
	if s != nil {
		if before, ok := s.others(); ok {
			if _, seen := rec.Changed[f.uplink]; !seen {
				rec.Changed[f.uplink] = before
				if err := f.save(rec); err != nil {
					return fmt.Errorf("network: record forwarding of %s: %w", f.uplink, err)
				}
			}
		}
	}
	ifaces := []string{f.bridge, f.uplink}
	err = inNetNS(f.ns, func() error {
		if createdBridge {
			if err := writeSysctl("net/ipv6/conf/"+f.bridge+"/disable_ipv6", "1"); err != nil {
				f.log.Debug("network: cannot disable IPv6 on the bridge", "err", err)
			}
		}
		for _, iface := range ifaces {
			cur, err := readSysctl(forwardingSysctl(iface))
			if err != nil {
				return fmt.Errorf("read forwarding of %s: %w", iface, err)
			}
			if cur == "1" {
				continue
			}
			// Record before writing: a crash in between then leads to a
			// restore of a value that was already right, never to a switch
			// left on for ever.
			if _, seen := rec.Changed[iface]; !seen {
				rec.Changed[iface] = cur
				if err := f.save(rec); err != nil {
					return fmt.Errorf("record forwarding of %s: %w", iface, err)
				}
			}
			if err := writeSysctl(forwardingSysctl(iface), "1"); err != nil {
				return fmt.Errorf("enable forwarding on %s: %w", iface, err)
			}
			f.log.Info("network: enabled IPv4 forwarding", "interface", iface)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("network: %w", err)
	}
	if _, ours := rec.Changed[f.uplink]; ours && s != nil {
		return s.join()
	}
	return nil
}

// restore puts back every forwarding switch warren flipped, in
// this run or an earlier one, on interfaces that still exist.
func (f *forwarder) restore() error {
	s := f.share()
	if s == nil {
		return f.restoreLocked(nil)
	}
	return s.locked(func() error { return f.restoreLocked(s) })
}

// restoreLocked is restore under the uplink entry's lock (s nil:
// unshared). The uplink's switch stays on while another daemon holds it;
// that daemon's record restores it when it leaves.
func (f *forwarder) restoreLocked(s *uplinkShare) error {
	rec, err := f.load()
	if err != nil {
		return err
	}
	keepUplink := false
	if s != nil {
		_, keepUplink = s.others()
	}
	var errs []error
	err = inNetNS(f.ns, func() error {
		for _, iface := range slices.Sorted(maps.Keys(rec.Changed)) {
			if iface == f.uplink && keepUplink {
				f.log.Info("network: another daemon still forwards through the uplink; its forwarding stays on", "interface", iface)
				delete(rec.Changed, iface)
				continue
			}
			err := writeSysctl(forwardingSysctl(iface), rec.Changed[iface])
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("restore forwarding of %s: %w", iface, err))
				continue
			}
			delete(rec.Changed, iface)
		}
		return nil
	})
	errs = append(errs, err, f.save(rec))
	if _, still := rec.Changed[f.uplink]; !still && s != nil {
		errs = append(errs, s.leave())
		s.removeIfUnused()
	}
	return errors.Join(errs...)
}
