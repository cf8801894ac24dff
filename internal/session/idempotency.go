package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

// A create sent with an Idempotency-Key makes at most one sandbox per team
// and key: a retry (the client timed out, a gateway died mid-request) gets
// the sandbox the first attempt made. The key is stored in the sandbox's
// record, under a unique index, in the same insert that reserves the
// sandbox, so two attempts racing each other (or a daemon killed between
// them) cannot both make one.

// IdempotencyWindow is how long a key keeps answering with its sandbox; an
// older key is freed for a new create.
const IdempotencyWindow = 24 * time.Hour

// replayPoll is how often a retry looks whether the first attempt, still
// creating, has finished.
const replayPoll = 50 * time.Millisecond

// idempotencyStore is what idempotent creates need of the store.
type idempotencyStore interface {
	SandboxByIdempotencyKey(ctx context.Context, team, key string) (store.Sandbox, error)
	ForgetIdempotencyKey(ctx context.Context, team, key string) error
}

// CreateOnce is Create for a request that may carry an IdempotencyKey.
// replayed is true when the sandbox is the one an earlier request with the
// same key made (whatever that request's body asked for); it is returned
// once it is no longer creating. A key whose sandbox failed, or older than
// IdempotencyWindow, makes a new sandbox.
func (l *lifecycle) CreateOnce(ctx context.Context, req CreateRequest) (rec store.Sandbox, replayed bool, err error) {
	if req.IdempotencyKey == "" {
		rec, err = l.Create(ctx, req)
		return rec, false, err
	}
	if err := store.ValidateIdempotencyKey(req.IdempotencyKey); err != nil {
		return store.Sandbox{}, false, err
	}
	// Twice at most: a create that loses the race for the key to another
	// finds the winner's sandbox on the second look.
	for range 2 {
		if rec, ok, err := l.earlier(ctx, req.Team, req.IdempotencyKey); err != nil || ok {
			return rec, ok, err
		}
		rec, err = l.Create(ctx, req)
		if !errors.Is(err, errdefs.ErrAlreadyExists) {
			return rec, false, err
		}
	}
	return store.Sandbox{}, false, fmt.Errorf("creates with this idempotency key keep colliding; retry: %w", errdefs.ErrConflict)
}

// earlier returns the sandbox an earlier create with key made, once it has
// finished creating; ok is false when there is none to answer with.
func (l *lifecycle) earlier(ctx context.Context, team, key string) (store.Sandbox, bool, error) {
	for {
		rec, err := l.store.SandboxByIdempotencyKey(ctx, team, key)
		if errdefs.IsNotFound(err) {
			return store.Sandbox{}, false, nil
		}
		if err != nil {
			return store.Sandbox{}, false, err
		}
		if rec.State == StateFailed || l.cfg.Now().Sub(rec.CreatedAt) > IdempotencyWindow {
			if err := l.store.ForgetIdempotencyKey(ctx, team, key); err != nil {
				return store.Sandbox{}, false, err
			}
			return store.Sandbox{}, false, nil
		}
		if rec.State != StateCreating {
			return rec, true, nil
		}
		select {
		case <-ctx.Done():
			return store.Sandbox{}, false, fmt.Errorf("waiting for the create with the same idempotency key to finish: %w", ctx.Err())
		case <-time.After(replayPoll):
		}
	}
}
