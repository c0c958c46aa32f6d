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

// readCounter is a real store that counts the reads of request id once
// armed, and calls onMany (once) at the many-th.
type readCounter struct {
	store.Store
	id     approval.ID
	armed  atomic.Bool
	reads  atomic.Int64
	many   int64
	onMany func()
}

func (s *readCounter) GetRequest(ctx context.Context, id approval.ID) (approval.Request, error) {
	if id == s.id && s.armed.Load() {
		if s.reads.Add(1) == s.many {
			s.onMany()
		}
	}
	return s.Store.GetRequest(ctx, id)
}

// TestResumeWaitsForALongDispatchWithoutSpinning (attack27): a re-send
// naming an approval whose call is still running (consumed, no outcome
// yet, its dispatch lease renewed) waits for its result (resume). Its
// wait ended at the approval's validity (ExpiresAt + ValidFor), which a
// consumed request is past once its tool runs longer than what was left
// of it: the wait's timer was then already due, and the re-send read the
// request (and the ledger) again and again without pause until the
// dispatch finished, a busy loop on the store. It now waits for a change
// (the outcome's wake-up) or the dispatch lease's end.
func TestResumeWaitsForALongDispatchWithoutSpinning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := sqlitetest.Open(t)
		rctx, rcancel := context.WithCancelCause(t.Context())
		s := &readCounter{Store: db, many: 50, onMany: func() { rcancel(errors.New("the re-send spins")) }}
		pol := &swappable{}
		p := testPolicy(time.Minute) // pending for up to a minute, then valid for one more
		p.Approval.ValidFor = time.Minute
		pol.p.Store(p)
		g := New(s, pol, &Options{Instance: "a"})
		watch(t, db, g) // the outcome's commit wakes the re-send, as cmd wires it
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { _ = g.Run(ctx); close(done) }() // renews the dispatch lease
		defer func() { cancel(); <-done }()

		c := writeCall("/long-dispatch")
		ch := admitAsync(t.Context(), g, c)
		r := waitPending(t, db, 1)[0]
		if _, err := g.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		a := recv(t, ch)
		if !a.Allowed {
			t.Fatalf("admission %+v, want allowed", a)
		}
		// The tool runs past the approval's validity.
		time.Sleep(time.Until(r.ExpiresAt.Add(r.ValidFor)) + time.Minute)
		cur, err := db.GetRequest(t.Context(), r.ID)
		if err != nil || cur.State != approval.StateConsumed || cur.DispatchOutcome != approval.OutcomeNone || cur.LeaseLapsed(time.Now()) {
			t.Fatalf("request while its tool runs: %+v %v; want consumed, no outcome, leased", cur, err)
		}

		s.id = r.ID
		s.armed.Store(true)
		c.Resume = r.ID
		resent := admitAsync(rctx, g, c)
		time.Sleep(5 * time.Second) // the tool still runs
		if n := s.reads.Load(); n > 3 {
			t.Errorf("the re-send read the request %d times while the tool ran (5 s; its wait's end was past): want it to wait for the outcome", n)
		}
		a.FinishWith(t.Context(), approval.OutcomeOK, Recorded{Result: []byte(`{"content":[{"type":"text","text":"done"}]}`)})
		got := recv(t, resent)
		if got.Replay == nil || !strings.Contains(string(got.Replay.Result), "done") {
			t.Errorf("re-send: %q (replay %v), want the dispatch's result replayed", got.Message, got.Replay)
		}
	})
}

// writesFail is a real store whose request writes fail once armed (a
// store that answers reads but refuses writes: a failover's read-only
// standby, a full disk), counting the reads of request id and calling
// onMany (once) at the many-th.
type writesFail struct {
	readCounter
}

func (s *writesFail) UpdateRequest(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	if s.armed.Load() {
		return approval.Request{}, store.ErrUnavailable
	}
	return s.Store.UpdateRequest(ctx, id, actor, fn)
}

// TestResumeTakeOverRefusedByTheStoreDoesNotSpin (attack27): a re-send
// naming an approval nobody holds takes it over (resume's takeOver); when
// the store refuses that write, the round said "someone else took it
// meanwhile: look again", and the next round read the request and tried
// again at once, without pause, for as long as the store refused writes.
// The re-send is now refused, as a failed read refuses it: nothing was
// run.
func TestResumeTakeOverRefusedByTheStoreDoesNotSpin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := sqlitetest.Open(t)
		rctx, rcancel := context.WithCancelCause(t.Context())
		s := &writesFail{readCounter{Store: db, many: 50, onMany: func() { rcancel(errors.New("the re-send spins")) }}}
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		g := New(s, pol, &Options{Instance: "a"})
		watch(t, db, g)
		c := writeCall("/take-over-refused")
		yctx, ycancel := context.WithCancelCause(t.Context())
		first := admitAsync(yctx, g, c)
		r := waitPending(t, db, 1)[0]
		ycancel(errors.New("connection closed")) // the call goes away: its lease is released
		if a := recv(t, first); a.Allowed {
			t.Fatalf("first call: %+v, want not run", a)
		}
		synctest.Wait()
		if cur, err := db.GetRequest(t.Context(), r.ID); err != nil || !cur.LeaseLapsed(time.Now()) {
			t.Fatalf("after the call went away: %v, lease until %s; want its lease released", err, cur.LeaseUntil)
		}

		s.id = r.ID
		s.armed.Store(true)
		c.Resume = r.ID
		got := recv(t, admitAsync(rctx, g, c))
		if n := s.reads.Load(); n > 3 {
			t.Errorf("the re-send read the request %d times while the store refused its take-over: want it refused", n)
		}
		if got.Allowed || !strings.Contains(got.Message, "store is unavailable") || !strings.Contains(got.Message, "nothing was run") {
			t.Errorf("re-send: %q, want it refused: the store is unavailable, nothing was run", got.Message)
		}
	})
}
