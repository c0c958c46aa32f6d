package gate

// A dispatch outcome whose write committed although its writer saw an
// error (the COMMIT's reply lost) is recognised by the retry as its own:
// no ERROR log, no second write of the result.

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
)

// lostOutcome is a real store whose first write that records a dispatch
// outcome, once armed, commits and then answers errLostCommit; it counts
// the results written on their own (PutResult).
type lostOutcome struct {
	store.Store
	armed atomic.Bool
	lost  atomic.Int32
	puts  atomic.Int32
}

func (s *lostOutcome) lose(r approval.Request, err error) (approval.Request, error) {
	if err != nil || r.DispatchOutcome == approval.OutcomeNone || !s.armed.CompareAndSwap(true, false) {
		return r, err
	}
	s.lost.Add(1)
	return approval.Request{}, errLostCommit
}

func (s *lostOutcome) UpdateRequest(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	return s.lose(s.Store.UpdateRequest(ctx, id, actor, fn))
}

func (s *lostOutcome) RecordDispatch(ctx context.Context, r store.Result, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	return s.lose(s.Store.RecordDispatch(ctx, r, actor, fn))
}

func (s *lostOutcome) RecordOutcome(ctx context.Context, id approval.ID, o approval.Outcome, rec *store.Result, actor string) error {
	// As lose: a write that recorded an outcome (o) is lost once armed.
	if err := s.Store.RecordOutcome(ctx, id, o, rec, actor); err != nil || !s.armed.CompareAndSwap(true, false) {
		return err
	}
	s.lost.Add(1)
	return errLostCommit
}

func (s *lostOutcome) PutResult(ctx context.Context, r store.Result) error {
	s.puts.Add(1)
	return s.Store.PutResult(ctx, r)
}

// syncBuffer is a bytes.Buffer safe for the gate's logging goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// The outcome write of an approved call (with its result, and without
// one) commits but answers an error: the background retry finds the same
// outcome and the same result recorded and takes them as its own. Before,
// it failed with ErrResolved, logged "cannot record dispatch outcome" at
// ERROR and wrote the result a second time (PutResult).
func TestLostCommitOfOutcomeIsRecognised(t *testing.T) {
	for _, withResult := range []bool{true, false} {
		name := "without result"
		if withResult {
			name = "with result"
		}
		t.Run(name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, db *sqlstore.DB) {
				t.Helper()
				var logs syncBuffer
				pol := &swappable{}
				pol.p.Store(testPolicy(time.Minute))
				lo := &lostOutcome{Store: db}
				g := New(lo, pol, &Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
				watch(t, db, g)
				c := writeCall("/lost-outcome")
				ch := admitAsync(t.Context(), g, c)
				r := waitPending(t, db, 1)[0]
				if _, err := New(db, pol, &Options{}).Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", ""); err != nil {
					t.Fatal(err)
				}
				a := recv(t, ch)
				if !a.Allowed {
					t.Fatalf("admission %+v, want allowed", a)
				}
				lo.armed.Store(true)
				want := Recorded{}
				if withResult {
					want.Result = []byte(`{"content":[{"type":"text","text":"done"}]}`)
				}
				a.FinishWith(t.Context(), approval.OutcomeOK, want)
				g.outcomes.Wait()
				if n := lo.lost.Load(); n != 1 {
					t.Fatalf("%d commits lost, want 1 (the outcome's)", n)
				}
				out := logs.String()
				if strings.Contains(out, "level=ERROR") || !strings.Contains(out, "dispatch outcome recorded after retrying") {
					t.Fatalf("logs:\n%s\nwant no ERROR and the retry's success", out)
				}
				if n := lo.puts.Load(); n != 0 {
					t.Fatalf("%d results written on their own, want 0", n)
				}
				cur, err := db.GetRequest(t.Context(), r.ID)
				if err != nil {
					t.Fatal(err)
				}
				if cur.DispatchOutcome != approval.OutcomeOK {
					t.Fatalf("stored outcome %q, want ok", cur.DispatchOutcome)
				}
				if withResult {
					res, err := db.GetResult(t.Context(), r.ID)
					if err != nil || string(res.Result) != string(want.Result) {
						t.Fatalf("ledger %s, %v; want %s", res.Result, err, want.Result)
					}
				}
			})
		})
	}
}

// A retried outcome write that finds another outcome, or the same outcome
// with another result, is not its own: it fails as before (ErrResolved),
// and the result is kept on its own.
func TestRetriedOutcomeNotItsOwn(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	g, db := f.gate, f.db
	ch := admitAsync(t.Context(), g, writeCall("/not-own"))
	r := waitPending(t, db, 1)[0]
	if _, err := New(db, f.pol, &Options{}).Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", ""); err != nil {
		t.Fatal(err)
	}
	if a := recv(t, ch); !a.Allowed {
		t.Fatalf("admission %+v, want allowed", a)
	}
	if _, err := db.RecordDispatch(t.Context(), store.Result{RequestID: r.ID, Result: []byte(`"theirs"`), RecordedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}, "toolgate",
		func(r *approval.Request) error { return r.RecordOutcome(approval.OutcomeOK) }); err != nil {
		t.Fatal(err)
	}
	mine := &store.Result{RequestID: r.ID, Result: []byte(`"mine"`)}
	if err := g.ownOutcome(t.Context(), r.ID, approval.OutcomeOK, mine); !errors.Is(err, approval.ErrResolved) {
		t.Fatalf("same outcome, another result: %v, want ErrResolved", err)
	}
	if err := g.ownOutcome(t.Context(), r.ID, approval.OutcomeOK, &store.Result{RequestID: r.ID, Result: []byte(`"theirs"`)}); err != nil {
		t.Fatalf("same outcome, same result: %v, want nil", err)
	}
}
