package gate

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// afterRead is a real store that, once armed, runs hook after one read of
// request id (its row already read, not yet returned): a change that lands
// between a reader's read and whatever it does next.
type afterRead struct {
	store.Store
	id    approval.ID
	armed atomic.Bool
	hook  func()
}

func (s *afterRead) GetRequest(ctx context.Context, id approval.ID) (approval.Request, error) {
	r, err := s.Store.GetRequest(ctx, id)
	if id == s.id && s.armed.CompareAndSwap(true, false) {
		s.hook()
	}
	return r, err
}

// TestResumeSeesAChangeBetweenItsReadAndItsWait (fixes26): a re-send
// naming an approval that a live call holds (resume) reads the request,
// then waits for a change. It subscribed to the request's wake-ups only
// when it began to wait: a change between the read and the subscription
// (a decision here; another instance's release, which the watch reports
// with Touched on SQLite) was seen only at the wait's timer, the holder's
// lease end (15 s). It now subscribes before it reads.
func TestResumeSeesAChangeBetweenItsReadAndItsWait(t *testing.T) {
	t.Run("decision", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			db := sqlitetest.Open(t)
			s := &afterRead{Store: db}
			pol := &swappable{}
			pol.p.Store(testPolicy(time.Hour))
			x := New(s, pol, &Options{Instance: "x"})
			c := writeCall("/resume-decision")
			first := admitAsync(t.Context(), x, c) // the live call that holds it
			r := waitPending(t, db, 1)[0]
			s.id = r.ID
			s.hook = func() {
				if _, err := x.Review(context.Background(), r.ID, alice, approval.VerdictDeny, "no", ""); err != nil {
					t.Errorf("deny: %v", err)
				}
			}
			s.armed.Store(true)
			c.Resume = r.ID
			resent := admitAsync(t.Context(), x, c)
			start := time.Now()
			synctest.Wait() // every goroutine done or blocked; no time passes
			if a := recv(t, first); a.Allowed || !strings.Contains(a.Message, "denied") {
				t.Fatalf("first call: %+v, want denied", a)
			}
			select {
			case a := <-resent:
				if a.Allowed || !strings.Contains(a.Message, "denied") {
					t.Fatalf("re-send: %+v, want denied", a)
				}
			default:
				t.Fatalf("the request was denied between the re-send's read and its wait, but the re-send was not woken: it waits for the holder's lease end (%s)", r.LeaseUntil.Sub(start).Round(time.Second))
			}
		})
	})
	t.Run("release elsewhere", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			db := sqlitetest.Open(t)
			s := &afterRead{Store: db}
			pol := &swappable{}
			pol.p.Store(testPolicy(time.Hour))
			x := New(s, pol, &Options{Instance: "x"})
			y := New(db, pol, &Options{Instance: "y"})
			c := writeCall("/resume-release")
			yctx, ycancel := context.WithCancelCause(t.Context())
			first := admitAsync(yctx, y, c) // y's live call holds it
			r := waitPending(t, db, 1)[0]
			s.id = r.ID
			s.hook = func() {
				ycancel(errors.New("connection closed")) // y's caller goes away: y releases its lease
				if a := recv(t, first); a.Allowed {
					t.Errorf("y's call: %+v, want not run", a)
				}
				if cur, err := db.GetRequest(context.Background(), r.ID); err != nil || !cur.LeaseLapsed(time.Now()) {
					t.Errorf("y's call went away: %v, lease until %s; want its lease released", err, cur.LeaseUntil)
				}
				x.Touched() // as x's watch does on SQLite after y's commit
			}
			s.armed.Store(true)
			c.Resume = r.ID
			ctx, cancel := context.WithCancel(t.Context())
			resent := admitAsync(ctx, x, c)
			start := time.Now()
			synctest.Wait()
			cur, err := db.GetRequest(t.Context(), r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if cur.HeldBy != "x" || cur.LeaseLapsed(time.Now()) {
				t.Errorf("y released its lease between the re-send's read and its wait, but the re-send on x was not woken (the request: held by %q, lease until %s): it waits for the lease's end as read (%s); want it taken over by x at once",
					cur.HeldBy, cur.LeaseUntil.Format(time.RFC3339), r.LeaseUntil.Sub(start).Round(time.Second))
			}
			cancel()
			if a := recv(t, resent); a.Allowed {
				t.Fatalf("re-send: %+v, want not run (its caller went away)", a)
			}
		})
	})
}
