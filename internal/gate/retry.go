package gate

import (
	"context"
	"errors"
	"time"

	"toolgate/internal/store"
)

// Backoff of writes retried while the store is unavailable (issue 9,
// defect 13): a decision that was answered 200 must not be lost to a
// database restart or a moment of lock contention.
const (
	minRetry = 50 * time.Millisecond
	maxRetry = 2 * time.Second
	// attemptTimeout bounds one attempt, so a hung connection is given up
	// and tried again rather than waited on forever.
	attemptTimeout = 5 * time.Second
)

// transient reports whether err means the store could not be used right
// now (unreachable, busy, an attempt that ran out of time) rather than a
// refusal or a failed compare-and-set: the same write may succeed later.
func transient(err error) bool {
	return errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// retryStore runs op, each attempt with its own attemptTimeout, until it
// returns nil or an error that is not transient, or until stop is done;
// then it returns op's last error. Between attempts it waits from minRetry
// doubling to maxRetry. op's context is not canceled with stop: an attempt
// under way finishes (or times out), so a write is never cut in half by
// the caller going away.
func (g *Gate) retryStore(stop context.Context, op func(ctx context.Context) error) error {
	backoff := minRetry
	for {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(stop), attemptTimeout)
		err := op(ctx)
		cancel()
		g.health.report(err, g.now())
		if err == nil || !transient(err) {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-stop.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(2*backoff, maxRetry)
	}
}
