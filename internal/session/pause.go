package session

import (
	"context"
	"fmt"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

// Pause freezes a team's running sandbox: its processes stop where they are,
// their memory is kept, and its run timeout stops ticking. Pausing a paused
// sandbox is ErrConflict (E2B answers 409).
func (l *lifecycle) Pause(ctx context.Context, team, id string) error {
	return l.pause(ctx, team, id, CauseAPI)
}

func (l *lifecycle) pause(ctx context.Context, team, id, cause string) error {
	unlock := l.lockSandbox(id)
	defer unlock()
	return l.pauseLocked(ctx, team, id, cause)
}

// pauseLocked is pause for a caller that holds the sandbox's lock.
func (l *lifecycle) pauseLocked(ctx context.Context, team, id, cause string) error {
	rec, err := l.Get(ctx, team, id)
	if err != nil {
		return err
	}
	if rec.State == StatePaused || rec.State == StateHibernated {
		return fmt.Errorf("sandbox %s is already %s: %w", id, rec.State, errdefs.ErrConflict)
	}
	if err := checkTransition(id, rec.State, StatePaused); err != nil {
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
	if err := l.host.Pause(ctx, id); err != nil {
		return fmt.Errorf("pause sandbox %s: %w", id, err)
	}
	if err := l.store.UpdateSandboxState(context.WithoutCancel(ctx), id, []store.SandboxState{StateRunning}, StatePaused, ""); err != nil {
		_ = l.host.Resume(context.WithoutCancel(ctx), id, sb.Agent)
		return err
	}
	l.mu.Lock()
	sb.paused = true
	sb.pausedAt = l.cfg.Now()
	l.mu.Unlock()
	l.event(ctx, rec, "paused", StateRunning, StatePaused, cause, "")
	return nil
}

// Resume thaws a team's paused sandbox and waits for its agent. It reports
// whether the sandbox was paused (false: it was running already, nothing
// done). The time spent paused is added to the run timeout.
func (l *lifecycle) Resume(ctx context.Context, team, id string) (bool, error) {
	return l.resumeHow(ctx, team, id, CauseAPI, false)
}

// resumeHow resumes a paused sandbox; cold boots it afresh on its files
// rather than thaw or restore its memory (a filesystem-only pause always
// boots cold).
func (l *lifecycle) resumeHow(ctx context.Context, team, id, cause string, cold bool) (bool, error) {
	unlock := l.lockSandbox(id)
	defer unlock()
	rec, err := l.Get(ctx, team, id)
	if err != nil {
		return false, err
	}
	if rec.State == StateRunning {
		return false, nil
	}
	if err := checkTransition(id, rec.State, StateRunning); err != nil {
		return false, err
	}
	l.mu.Lock()
	sb := l.live[id]
	l.mu.Unlock()
	if sb == nil {
		return false, fmt.Errorf("sandbox %s is not attached to this daemon: %w", id, errdefs.ErrUnavailable)
	}
	if rec.State == StateHibernated {
		// A hibernated sandbox holds only disk: running, it counts
		// against its team's limits again.
		release, err := l.admitTeam(ctx, team, demand{Sandboxes: 1, MemoryBytes: rec.MemoryBytes, CPUMillis: rec.CPUMillis})
		if err != nil {
			return false, err
		}
		defer release()
	}
	bg := context.WithoutCancel(ctx)
	detail, err := l.bringBack(bg, rec, sb, cold || filesOnly(rec))
	if err != nil {
		return false, err
	}
	if err := l.store.UpdateSandboxState(bg, id, []store.SandboxState{StatePaused, StateHibernated}, StateRunning, ""); err != nil {
		return false, err
	}
	l.mu.Lock()
	pausedFor := l.cfg.Now().Sub(sb.pausedAt)
	if sb.pausedAt.IsZero() {
		// Paused by an earlier daemon: count from the record's last change.
		pausedFor = l.cfg.Now().Sub(rec.UpdatedAt)
	}
	sb.paused, sb.pausedAt = false, time.Time{}
	sb.lastActive = l.cfg.Now()
	l.mu.Unlock()
	l.event(ctx, rec, "resumed", rec.State, StateRunning, cause, "paused for "+pausedFor.Round(time.Millisecond).String()+detail)
	if !rec.EndAt.IsZero() && pausedFor > 0 {
		end := rec.EndAt.Add(pausedFor)
		if now := l.cfg.Now(); !end.After(now) && l.cfg.DefaultTimeout > 0 {
			// Paused by its own run timeout (autoPause): a resume starts a
			// fresh run timeout rather than pausing it again at once.
			end = now.Add(l.cfg.DefaultTimeout)
		}
		if err := l.store.SetSandboxEndAt(bg, id, end); err != nil {
			l.log.Warn("extend run timeout after pause", "sandbox", id, "err", err)
		}
	}
	return true, nil
}

// bringBack starts a paused sandbox's processes again: a cold boot on its
// files, a restore of its memory image (hibernated) or a thaw (paused). It
// returns what the resumed event adds.
func (l *lifecycle) bringBack(ctx context.Context, rec store.Sandbox, sb *liveSandbox, cold bool) (string, error) {
	switch {
	case cold:
		took, err := l.host.ColdBoot(ctx, specOf(rec), sb.Agent)
		if err != nil {
			// No processes to return to: the sandbox fails.
			l.mu.Lock()
			delete(l.live, rec.ID)
			l.mu.Unlock()
			l.fail(ctx, rec.ID, "cold boot failed: "+err.Error())
			_ = l.host.Destroy(ctx, rec.ID, sb.Agent)
			return "", fmt.Errorf("boot sandbox %s: %w", rec.ID, err)
		}
		l.mu.Lock()
		sb.hibernated = false
		l.mu.Unlock()
		return "; booted cold on its files in " + took.Round(time.Millisecond).String(), nil
	case rec.State == StateHibernated:
		took, err := l.wake(ctx, rec, sb)
		if err != nil {
			return "", fmt.Errorf("wake sandbox %s: %w", rec.ID, err)
		}
		return "; restored from its memory image in " + took.Round(time.Millisecond).String(), nil
	}
	if err := l.host.Resume(ctx, rec.ID, sb.Agent); err != nil {
		return "", fmt.Errorf("resume sandbox %s: %w", rec.ID, err)
	}
	return "", nil
}

// ExtendTimeout makes a team's sandbox run for at least d more (0 = never
// time out), as E2B's connect does: its end becomes the later of the one it
// has and now + d, so a connect that asks for less than the sandbox has
// left never cuts it short.
func (l *lifecycle) ExtendTimeout(ctx context.Context, team, id string, d time.Duration) error {
	if err := l.CheckTimeout(d); err != nil {
		return err
	}
	// Under the sandbox's lock: a resume moves the end too.
	unlock := l.lockSandbox(id)
	defer unlock()
	rec, err := l.Get(ctx, team, id)
	if err != nil {
		return err
	}
	if rec.State != StateRunning && rec.State != StatePaused {
		return fmt.Errorf("sandbox %s is %s: %w", id, rec.State, errdefs.ErrConflict)
	}
	end, keep := laterEnd(rec.EndAt, l.cfg.Now().UTC(), d)
	if keep {
		return nil
	}
	return l.store.SetSandboxEndAt(ctx, id, end)
}

// laterEnd is the later of a run timeout's end (zero: never) and now + d
// (d 0: never), and whether that is the current end.
func laterEnd(cur, now time.Time, d time.Duration) (time.Time, bool) {
	if cur.IsZero() {
		return cur, true
	}
	if d == 0 {
		return time.Time{}, false
	}
	if want := now.Add(d); want.After(cur) {
		return want, false
	}
	return cur, true
}

// SetTimeout makes a team's sandbox time out d from now (0 = never), as
// E2B's POST /sandboxes/{id}/timeout does.
func (l *lifecycle) SetTimeout(ctx context.Context, team, id string, d time.Duration) error {
	if err := l.CheckTimeout(d); err != nil {
		return err
	}
	rec, err := l.Get(ctx, team, id)
	if err != nil {
		return err
	}
	if rec.State != StateRunning && rec.State != StatePaused {
		return fmt.Errorf("sandbox %s is %s: %w", id, rec.State, errdefs.ErrConflict)
	}
	var end time.Time
	if d > 0 {
		end = l.cfg.Now().UTC().Add(d)
	}
	return l.store.SetSandboxEndAt(ctx, id, end)
}
