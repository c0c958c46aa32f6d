package gate

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// updatesCounted is committedButFailed counting the request updates
// (a lease's release is one) while counting is on.
type updatesCounted struct {
	*committedButFailed
	counting atomic.Bool
	n        atomic.Int32
}

func (u *updatesCounted) UpdateRequest(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	if u.counting.Load() {
		u.n.Add(1)
	}
	return u.committedButFailed.UpdateRequest(ctx, id, actor, fn)
}

// TestNoBackgroundReleaseAfterRun (attack25): Run waits for the gate's
// background releases (releaseLater) before it returns, so that nothing
// of the gate writes to the store after it (serve closes the store
// then). A release begun by a call refused while or after Run waited was
// not waited for: it wrote after Run had returned (and its WaitGroup.Go
// could race Run's Wait). Once Run is done, such a lease is left to lapse
// by itself, as when maxBackgroundReleases are under way.
func TestNoBackgroundReleaseAfterRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := sqlitetest.Open(t)
		s := &updatesCounted{committedButFailed: &committedButFailed{Store: db}}
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		g := New(s, pol, &Options{Instance: "a"})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { _ = g.Run(ctx); close(done) }()
		synctest.Wait()
		cancel()
		<-done // Run returned: the gate writes nothing more

		s.armed.Store(true)
		s.counting.Store(true)
		if a := g.Admit(t.Context(), writeCall("/after-run")); a.Allowed {
			t.Fatalf("%+v, want refused (the creation failed)", a)
		}
		synctest.Wait() // every goroutine of the bubble done or blocked
		if n := s.n.Load(); n != 0 {
			t.Errorf("after Run returned the gate wrote %d request updates (a background release Run did not wait for), want none", n)
		}
	})
}
