package session

import (
	"context"
	"fmt"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

// Hibernate saves a team's running or paused sandbox's memory and
// processes to disk and ends them: the sandbox then holds no memory or CPU
// and does not count against the sandbox limit, survives a daemon restart
// (and a reboot), and Resume — or any call, with autoResume — restores it
// with its processes where they were. Only runtimes that can save memory
// (gvisor) hibernate; others answer ErrUnsupported.
func (m *Manager) Hibernate(ctx context.Context, team, id string) (store.Sandbox, error) {
	return m.hibernate(ctx, team, id, CauseAPI)
}

func (m *Manager) hibernate(ctx context.Context, team, id, cause string) (store.Sandbox, error) {
	unlock := m.lockSandbox(id)
	defer unlock()
	return m.hibernateLocked(ctx, team, id, cause)
}

// hibernateLocked is hibernate for a caller that holds the sandbox's lock.
func (m *Manager) hibernateLocked(ctx context.Context, team, id, cause string) (store.Sandbox, error) {
	rec, err := m.Get(ctx, team, id)
	if err != nil {
		return store.Sandbox{}, err
	}
	if rec.State == StateHibernated {
		return store.Sandbox{}, fmt.Errorf("sandbox %s is already hibernated: %w", id, errdefs.ErrConflict)
	}
	if err := checkTransition(id, rec.State, StateHibernated); err != nil {
		return store.Sandbox{}, err
	}
	reopen, busy, err := m.closeAdmission(id, "hibernating", false)
	if err != nil {
		return store.Sandbox{}, err
	}
	if busy > 0 {
		return store.Sandbox{}, fmt.Errorf("sandbox %s has %d command(s) streaming; wait for them to finish before hibernating: %w", id, busy, errdefs.ErrConflict)
	}
	defer reopen()
	m.mu.Lock()
	sb := m.live[id]
	m.mu.Unlock()
	info, err := m.host.Hibernate(ctx, id)
	if err != nil {
		if errdefs.IsUnsupported(err) {
			return store.Sandbox{}, fmt.Errorf("sandbox %s runs on the %s runtime, which cannot save memory: hibernation needs the gvisor runtime (pause without memory works here): %w", id, rec.Runtime, errdefs.ErrInvalid)
		}
		// The checkpoint may have ended the processes; the watch fails the
		// sandbox if so.
		return store.Sandbox{}, fmt.Errorf("hibernate sandbox %s: %w", id, err)
	}
	bg := context.WithoutCancel(ctx)
	if err := m.store.UpdateSandboxState(bg, id, []store.SandboxState{StateRunning, StatePaused}, StateHibernated, ""); err != nil {
		return store.Sandbox{}, err
	}
	m.mu.Lock()
	if !sb.paused {
		sb.pausedAt = m.cfg.Now()
	}
	sb.paused, sb.hibernated = true, true
	m.mu.Unlock()
	m.event(ctx, rec, "hibernated", rec.State, StateHibernated, cause,
		fmt.Sprintf("memory image of %d bytes written in %s", info.Bytes, info.Duration.Round(time.Millisecond)))
	return m.store.GetSandbox(bg, id)
}

// wake restores a hibernated sandbox (called by resume, under the
// sandbox's lock) and returns how long the restore took.
func (m *Manager) wake(ctx context.Context, rec store.Sandbox, sb *liveSandbox) (time.Duration, error) {
	took, err := m.host.Wake(ctx, specOf(rec), sb.Agent)
	if err != nil {
		if errdefs.IsNotFound(err) {
			// The image is gone: nothing can bring the processes back.
			m.mu.Lock()
			delete(m.live, rec.ID)
			m.mu.Unlock()
			m.fail(context.WithoutCancel(ctx), rec.ID, "its hibernation image is missing: "+err.Error())
			_ = m.host.Destroy(context.WithoutCancel(ctx), rec.ID, sb.Agent)
		}
		return 0, err
	}
	m.mu.Lock()
	sb.hibernated = false
	m.mu.Unlock()
	return took, nil
}
