package procs

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// indexFile is the collector's state on disk: which agent instance the
// offsets belong to, and every process with the range of each stream kept.
const indexFile = "index.json"

type index struct {
	Instance  string       `json:"instance"`
	Processes []procRecord `json:"processes"`
}

// Exit is how a process ended.
type Exit struct {
	ExitCode int32  `json:"exitCode"`
	Signal   string `json:"signal,omitempty"`
	TimedOut bool   `json:"timedOut,omitempty"`
	Error    string `json:"error,omitempty"`
}

type procRecord struct {
	PID       int32     `json:"pid"`
	Seq       uint64    `json:"seq"`
	Tag       string    `json:"tag,omitempty"`
	Argv      []string  `json:"argv"`
	Cwd       string    `json:"cwd,omitempty"`
	User      string    `json:"user,omitempty"`
	StartedAt time.Time `json:"startedAt"`
	EndedAt   time.Time `json:"endedAt,omitzero"`
	Exit      *Exit     `json:"exit,omitempty"`
	// SeenExit is when this daemon learnt of the exit; the TTL runs from it
	// (the agent's clock is not trusted).
	SeenExit time.Time `json:"seenExit,omitzero"`
	Stdout   span      `json:"stdout"`
	Stderr   span      `json:"stderr"`
}

type span struct {
	Start uint64 `json:"start"`
	End   uint64 `json:"end"`
}

func ringPath(dir string, pid int32, seq uint64, ext string) string {
	return filepath.Join(dir, strconv.Itoa(int(pid))+"-"+strconv.FormatUint(seq, 10)+"."+ext)
}

func loadIndex(dir string) (index, error) {
	var ix index
	b, err := os.ReadFile(filepath.Join(dir, indexFile))
	if errors.Is(err, os.ErrNotExist) {
		return ix, nil
	}
	if err != nil {
		return ix, fmt.Errorf("read process index: %w", err)
	}
	if err := json.Unmarshal(b, &ix); err != nil {
		return index{}, fmt.Errorf("process index %s is damaged (%v); the output is collected afresh", filepath.Join(dir, indexFile), err)
	}
	return ix, nil
}

// saveIndex writes the index atomically (a temporary file renamed over it),
// so a kill -9 leaves the old or the new one, never half of one.
func saveIndex(dir string, ix index) error {
	b, err := json.Marshal(ix)
	if err != nil {
		return fmt.Errorf("encode process index: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("make process output dir: %w", err)
	}
	tmp := filepath.Join(dir, indexFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write process index: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, indexFile)); err != nil {
		return fmt.Errorf("write process index: %w", err)
	}
	return nil
}
