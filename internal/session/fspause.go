package session

import (
	"context"
	"fmt"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

// ReasonFilesOnly is the reason a hibernated record carries when its pause
// kept only the files (E2B's pause {memory: false}): there is no memory
// image, and the next resume boots the sandbox cold.
//
// A filesystem-only pause is the hibernated state rather than stopped or
// a paused state with a flag: hibernated already holds no processes, RAM
// or CPU, does not count against the sandbox limit, survives a daemon
// restart, lists and reads as "paused" through the E2B API and resumes on
// connect, which is all E2B's filesystem-only pause is. Stopped never runs
// again and lists as killed; paused holds frozen processes in RAM.
const ReasonFilesOnly = "paused without memory: its next start boots it cold"

// filesOnly reports whether a record is a filesystem-only pause.
func filesOnly(rec store.Sandbox) bool {
	return rec.State == StateHibernated && rec.Reason == ReasonFilesOnly
}

// PauseFiles ends a team's running sandbox's processes and keeps its files
// (E2B's pause {memory: false}): it then holds no memory or CPU, and the
// next connect boots it cold. Pausing a paused sandbox is ErrConflict.
func (l *lifecycle) PauseFiles(ctx context.Context, team, id string) error {
	unlock := l.lockSandbox(id)
	defer unlock()
	return l.pauseFilesLocked(ctx, team, id, CauseAPI)
}

// pauseFilesLocked is PauseFiles for a caller that holds the sandbox's lock.
func (l *lifecycle) pauseFilesLocked(ctx context.Context, team, id, cause string) error {
	rec, err := l.Get(ctx, team, id)
	if err != nil {
		return err
	}
	if rec.State == StatePaused || rec.State == StateHibernated {
		return fmt.Errorf("sandbox %s is already paused: %w", id, errdefs.ErrConflict)
	}
	if err := checkTransition(id, rec.State, StateHibernated); err != nil {
		return err
	}
	reopen, busy, err := l.closeAdmission(id, "pausing", false)
	if err != nil {
		return err
	}
	if busy > 0 {
		return fmt.Errorf("sandbox %s has %d command(s) streaming; wait for them to finish before pausing: %w", id, busy, errdefs.ErrConflict)
	}
	defer reopen()
	l.mu.Lock()
	sb := l.live[id]
	l.mu.Unlock()
	if sb == nil {
		return fmt.Errorf("sandbox %s is not attached to this daemon: %w", id, errdefs.ErrUnavailable)
	}
	// Marked hibernated first, so that the watch does not take the ended
	// processes for a crash.
	l.mu.Lock()
	sb.paused, sb.hibernated, sb.pausedAt = true, true, l.cfg.Now()
	l.mu.Unlock()
	bg := context.WithoutCancel(ctx)
	if err := l.host.PowerOff(bg, id); err != nil {
		l.fail(bg, id, "filesystem-only pause failed: "+err.Error())
		return fmt.Errorf("pause sandbox %s: %w", id, err)
	}
	if err := l.store.UpdateSandboxState(bg, id, []store.SandboxState{StateRunning}, StateHibernated, ReasonFilesOnly); err != nil {
		return err
	}
	l.event(ctx, rec, "paused", StateRunning, StateHibernated, cause, "files kept, memory dropped: the next connect boots it cold")
	return nil
}

// Reboot is Resume that drops a paused sandbox's memory and boots it cold
// on its files (E2B's connect {memory: false}, the SDK's onResume:
// 'reboot'). A running sandbox is left as it is.
func (l *lifecycle) Reboot(ctx context.Context, team, id string) (bool, error) {
	return l.resumeHow(ctx, team, id, CauseAPI, true)
}
