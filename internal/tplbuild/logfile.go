package tplbuild

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/warrenhq/warren/internal/ids"
)

// maxLogFileBytes bounds a finished build's log on disk: the entries past
// it are dropped (the failure's lines are always kept).
const maxLogFileBytes = 4 << 20

// logFile is a finished build's log as kept on disk, so that its status
// still shows it after the server restarts.
type logFile struct {
	Entries []LogEntry `json:"entries"`
	Failure []LogEntry `json:"failure,omitempty"`
}

func (s *Service) logPath(buildID string) string {
	return filepath.Join(s.files.dir, ".build-logs", buildID+".json") // no team is named so
}

// saveLog writes a finished build's log under the data directory. A log
// it cannot write is only a warning: the build itself is recorded.
func (s *Service) saveLog(buildID string, l *buildLog) {
	l.mu.Lock()
	f := logFile{Failure: append([]LogEntry(nil), l.failure...)}
	size := 0
	for _, e := range l.entries {
		if size += len(e.Message) + 100; size > maxLogFileBytes {
			break
		}
		f.Entries = append(f.Entries, e)
	}
	l.mu.Unlock()
	err := writeLogFile(s.logPath(buildID), f)
	if err != nil {
		s.cfg.Log.Warn("keep template build log", "build", buildID, "err", err)
	}
}

func writeLogFile(path string, f logFile) error {
	data, err := json.Marshal(f)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// loadLog reads the log a finished build left on disk: nil when there is
// none (a build from before logs were kept, or one still running).
func (s *Service) loadLog(buildID string) *buildLog {
	if ids.Validate("buildID", buildID) != nil {
		return nil
	}
	data, err := os.ReadFile(s.logPath(buildID))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.cfg.Log.Warn("read template build log", "build", buildID, "err", err)
		}
		return nil
	}
	var f logFile
	if err := json.Unmarshal(data, &f); err != nil {
		s.cfg.Log.Warn("read template build log", "build", buildID, "err", err)
		return nil
	}
	return &buildLog{entries: f.Entries, failure: f.Failure}
}

// removeLog deletes a build's log file at path (its build is gone).
func removeLog(log *slog.Logger, path string) {
	for _, p := range []string{path, path + ".tmp"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Warn("delete template build log", "path", p, "err", err)
		}
	}
}

// sweepLogs deletes the log files of builds the database no longer has:
// a delete the server stopped in before removing them, or builds any
// retention pruned. Errors are warnings: a stale log only takes space.
func (s *Service) sweepLogs(ctx context.Context) {
	dir := filepath.Dir(s.logPath("x"))
	ents, err := os.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.cfg.Log.Warn("sweep template build logs", "err", err)
		}
		return
	}
	removed := 0
	for _, e := range ents {
		id, ok := strings.CutSuffix(strings.TrimSuffix(e.Name(), ".tmp"), ".json")
		if !ok || ids.Validate("buildID", id) != nil {
			continue
		}
		exists, err := s.cfg.Store.TemplateBuildExists(ctx, id)
		if err != nil {
			s.cfg.Log.Warn("sweep template build logs", "err", err)
			return
		}
		if !exists {
			removeLog(s.cfg.Log, s.logPath(id))
			removed++
		}
	}
	if removed > 0 {
		s.cfg.Log.Info("deleted the logs of template builds that are gone", "builds", removed)
	}
}
