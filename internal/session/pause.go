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
func (m *Manager) Pause(ctx context.Context, team, id string) error {
	return m.pause(ctx, team, id, CauseAPI)
}

func (m *Manager) pause(ctx context.Context, team, id, cause string) error {
	unlock := m.lockSandbox(id)
	defer unlock()
	return m.pauseLocked(ctx, team, id, cause)
}

// pauseLocked is pause for a caller that holds the sandbox's lock.
func (m *Manager) pauseLocked(ctx context.Context, team, id, cause string) error {
	rec, err := m.Get(ctx, team, id)
	if err != nil {
		return err
	}
	if rec.State == StatePaused || rec.State == StateHibernated {
		return fmt.Errorf("sandbox %s is already %s: %w", id, rec.State, errdefs.ErrConflict)
	}
	if err := checkTransition(id, rec.State, StatePaused); err != nil {
		return err
	}
	reopen, busy, err := m.closeAdmission(id, "pausing", false)
	if err != nil {
		return err
	}
	if busy > 0 {
		return fmt.Errorf("sandbox %s has %d command(s) streaming; wait for them to finish before pausing: %w", id, busy, errdefs.ErrConflict)
	}
	defer reopen()
	m.mu.Lock()
	sb := m.live[id]
	m.mu.Unlock()
	if err := m.host.Pause(ctx, id); err != nil {
		return fmt.Errorf("pause sandbox %s: %w", id, err)
	}
	if err := m.store.UpdateSandboxState(context.WithoutCancel(ctx), id, []store.SandboxState{StateRunning}, StatePaused, ""); err != nil {
		_ = m.host.Resume(context.WithoutCancel(ctx), id, sb.Agent)
		return err
	}
	m.mu.Lock()
	sb.paused = true
	sb.pausedAt = m.cfg.Now()
	m.mu.Unlock()
	m.event(ctx, rec, "paused", StateRunning, StatePaused, cause, "")
	return nil
}

// Resume thaws a team's paused sandbox and waits for its agent. It reports
// whether the sandbox was paused (false: it was running already, nothing
// done). The time spent paused is added to the run timeout.
func (m *Manager) Resume(ctx context.Context, team, id string) (bool, error) {
	return m.resume(ctx, team, id, CauseAPI)
}

func (m *Manager) resume(ctx context.Context, team, id, cause string) (bool, error) {
	unlock := m.lockSandbox(id)
	defer unlock()
	rec, err := m.Get(ctx, team, id)
	if err != nil {
		return false, err
	}
	if rec.State == StateRunning {
		return false, nil
	}
	if err := checkTransition(id, rec.State, StateRunning); err != nil {
		return false, err
	}
	m.mu.Lock()
	sb := m.live[id]
	m.mu.Unlock()
	if sb == nil {
		return false, fmt.Errorf("sandbox %s is not attached to this daemon: %w", id, errdefs.ErrUnavailable)
	}
	bg := context.WithoutCancel(ctx)
	detail := ""
	if rec.State == StateHibernated {
		took, err := m.wake(bg, rec, sb)
		if err != nil {
			return false, fmt.Errorf("wake sandbox %s: %w", id, err)
		}
		detail = "; restored from its memory image in " + took.Round(time.Millisecond).String()
	} else if err := m.host.Resume(bg, id, sb.Agent); err != nil {
		return false, fmt.Errorf("resume sandbox %s: %w", id, err)
	}
	if err := m.store.UpdateSandboxState(bg, id, []store.SandboxState{StatePaused, StateHibernated}, StateRunning, ""); err != nil {
		return false, err
	}
	m.mu.Lock()
	pausedFor := m.cfg.Now().Sub(sb.pausedAt)
	if sb.pausedAt.IsZero() {
		// Paused by an earlier daemon: count from the record's last change.
		pausedFor = m.cfg.Now().Sub(rec.UpdatedAt)
	}
	sb.paused, sb.pausedAt = false, time.Time{}
	sb.lastActive = m.cfg.Now()
	m.mu.Unlock()
	m.event(ctx, rec, "resumed", rec.State, StateRunning, cause, "paused for "+pausedFor.Round(time.Millisecond).String()+detail)
	if !rec.EndAt.IsZero() && pausedFor > 0 {
		end := rec.EndAt.Add(pausedFor)
		if now := m.cfg.Now(); !end.After(now) && m.cfg.DefaultTimeout > 0 {
			// Paused by its own run timeout (autoPause): a resume starts a
			// fresh run timeout rather than pausing it again at once.
			end = now.Add(m.cfg.DefaultTimeout)
		}
		if err := m.store.SetSandboxEndAt(bg, id, end); err != nil {
			m.log.Warn("extend run timeout after pause", "sandbox", id, "err", err)
		}
	}
	return true, nil
}

// CheckTimeout checks a run timeout a caller asks for: not negative, and
// not 0 (never) when the server requires one (Config.RequireTimeout). The
// API checks with it before acting, so that a resume with a refused
// timeout does not resume first.
func (m *Manager) CheckTimeout(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("timeout must not be negative: %w", errdefs.ErrInvalid)
	}
	if d == 0 && m.cfg.RequireTimeout {
		return fmt.Errorf("timeout 0 (never expire) is turned off on this server (warren serve --allow-no-timeout=false): give a timeout of at least 1 second: %w", errdefs.ErrInvalid)
	}
	return nil
}

// SetTimeout makes a team's sandbox time out d from now (0 = never), as
// E2B's POST /sandboxes/{id}/timeout does.
func (m *Manager) SetTimeout(ctx context.Context, team, id string, d time.Duration) error {
	if err := m.CheckTimeout(d); err != nil {
		return err
	}
	rec, err := m.Get(ctx, team, id)
	if err != nil {
		return err
	}
	if rec.State != StateRunning && rec.State != StatePaused {
		return fmt.Errorf("sandbox %s is %s: %w", id, rec.State, errdefs.ErrConflict)
	}
	var end time.Time
	if d > 0 {
		end = m.cfg.Now().UTC().Add(d)
	}
	return m.store.SetSandboxEndAt(ctx, id, end)
}
