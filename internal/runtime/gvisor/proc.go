package gvisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// procRecord names the sandbox process (runsc-sandbox, gVisor's kernel) of
// a started sandbox by pid and start time, so that Status can tell whether
// it runs from /proc alone: the daemon asks every second for every sandbox,
// and a runsc command costs ~10 ms. When the sandbox's PID 1 exits, runsc
// ends the sandbox process, so "process gone" is "stopped".
type procRecord struct {
	Pid   int    `json:"pid"`
	Start string `json:"start"` // field 22 of /proc/<pid>/stat
}

func (b bundles) procFile(id string) string   { return filepath.Join(b.bundle(id), "sandbox.json") }
func (b bundles) pausedFile(id string) string { return filepath.Join(b.bundle(id), "paused") }

func (b bundles) writeProc(id string, pid int) error {
	start, alive := procStart(pid)
	if !alive {
		return fmt.Errorf("sandbox process %d is gone", pid)
	}
	data, err := json.Marshal(procRecord{Pid: pid, Start: start})
	if err != nil {
		return err
	}
	tmp := b.procFile(id) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, b.procFile(id))
}

// readProc returns id's record; ok is false when there is none (a Start
// that died before writing it).
func (b bundles) readProc(id string) (procRecord, bool) {
	var rec procRecord
	data, err := os.ReadFile(b.procFile(id))
	if err != nil || json.Unmarshal(data, &rec) != nil || rec.Pid <= 0 {
		return procRecord{}, false
	}
	return rec, true
}

func (rec procRecord) alive() bool {
	start, alive := procStart(rec.Pid)
	return alive && start == rec.Start
}

// setPaused records whether id is paused (runsc's own record is in its
// state, which only a runsc command reads).
func (b bundles) setPaused(id string, paused bool) error {
	if paused {
		return os.WriteFile(b.pausedFile(id), nil, 0o600)
	}
	if err := os.Remove(b.pausedFile(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func (b bundles) isPaused(id string) bool {
	_, err := os.Stat(b.pausedFile(id))
	return err == nil
}

// procStart returns a process's start time (field 22 of /proc/pid/stat),
// which tells a live process from a reused pid; a zombie is not alive.
func procStart(pid int) (string, bool) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return "", false
	}
	if f[0] == "Z" || f[0] == "X" {
		return f[19], false
	}
	return f[19], true
}
