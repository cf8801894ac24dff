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
func (l *lifecycle) Hibernate(ctx context.Context, team, id string) (store.Sandbox, error) {
	return l.hibernate(ctx, team, id, CauseAPI)
}

func (l *lifecycle) hibernate(ctx context.Context, team, id, cause string) (store.Sandbox, error) {
	unlock := l.lockSandbox(id)
	defer unlock()
	return l.hibernateLocked(ctx, team, id, cause)
}

// hibernateLocked is hibernate for a caller that holds the sandbox's lock.
func (l *lifecycle) hibernateLocked(ctx context.Context, team, id, cause string) (store.Sandbox, error) {
	rec, err := l.Get(ctx, team, id)
	if err != nil {
		return store.Sandbox{}, err
	}
	if rec.State == StateHibernated {
		return store.Sandbox{}, fmt.Errorf("sandbox %s is already hibernated: %w", id, errdefs.ErrConflict)
	}
	if err := checkTransition(id, rec.State, StateHibernated); err != nil {
		return store.Sandbox{}, err
	}
	reopen, busy, err := l.closeAdmission(id, "hibernating", false)
	if err != nil {
		return store.Sandbox{}, err
	}
	if busy > 0 {
		return store.Sandbox{}, fmt.Errorf("sandbox %s has %d command(s) streaming; wait for them to finish before hibernating: %w", id, busy, errdefs.ErrConflict)
	}
	defer reopen()
	l.mu.Lock()
	sb := l.live[id]
	l.mu.Unlock()
	info, err := l.host.Hibernate(ctx, id)
	if err != nil {
		if errdefs.IsUnsupported(err) {
			return store.Sandbox{}, fmt.Errorf("sandbox %s runs on the %s runtime, which cannot save memory: hibernation needs the gvisor runtime (pause without memory works here): %w", id, rec.Runtime, errdefs.ErrInvalid)
		}
		// The checkpoint may have ended the processes; the watch fails the
		// sandbox if so.
		return store.Sandbox{}, fmt.Errorf("hibernate sandbox %s: %w", id, err)
	}
	bg := context.WithoutCancel(ctx)
	if err := l.store.UpdateSandboxState(bg, id, []store.SandboxState{StateRunning, StatePaused}, StateHibernated, ""); err != nil {
		return store.Sandbox{}, err
	}
	l.mu.Lock()
	if !sb.paused {
		sb.pausedAt = l.cfg.Now()
	}
	sb.paused, sb.hibernated = true, true
	l.mu.Unlock()
	l.event(ctx, rec, "hibernated", rec.State, StateHibernated, cause,
		fmt.Sprintf("memory image of %d bytes written in %s", info.Bytes, info.Duration.Round(time.Millisecond)))
	return l.store.GetSandbox(bg, id)
}

// wake restores a hibernated sandbox (called by resume, under the
// sandbox's lock) and returns how long the restore took.
func (l *lifecycle) wake(ctx context.Context, rec store.Sandbox, sb *liveSandbox) (time.Duration, error) {
	took, err := l.host.Wake(ctx, specOf(rec), sb.Agent)
	if err != nil {
		if errdefs.IsNotFound(err) {
			// The image is gone: nothing can bring the processes back.
			l.mu.Lock()
			delete(l.live, rec.ID)
			l.mu.Unlock()
			l.fail(context.WithoutCancel(ctx), rec.ID, "its hibernation image is missing: "+err.Error())
			_ = l.host.Destroy(context.WithoutCancel(ctx), rec.ID, sb.Agent)
		}
		return 0, err
	}
	l.mu.Lock()
	sb.hibernated = false
	l.mu.Unlock()
	return took, nil
}
