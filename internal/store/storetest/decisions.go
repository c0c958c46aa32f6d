package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// testDecideExactlyOnce races 8 reviewers on one request: only the reviews
// that fit while it is pending win, exactly one of them settles it, and the
// others see ErrResolved (or ErrConflict).
func testDecideExactlyOnce(t *testing.T, s store.Store) {
	tests := []struct {
		name     string
		required int
		verdict  func(i int) approval.Verdict
		wantWins int
	}{
		{"one approval, mixed verdicts", 1, func(i int) approval.Verdict {
			if i%2 == 0 {
				return approval.VerdictApprove
			}
			return approval.VerdictDeny
		}, 1},
		{"two approvals", 2, func(int) approval.Verdict { return approval.VerdictApprove }, 2},
	}
	for n, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := pending(id(1, n))
			r.RequiredApprovals = tc.required
			mustCreate(t, s, r)

			var (
				mu      sync.Mutex
				winners []string
				start   = make(chan struct{})
				wg      sync.WaitGroup
			)
			for i := range 8 {
				name := fmt.Sprint("rev", i)
				wg.Go(func() {
					<-start
					_, err := s.UpdateRequest(t.Context(), r.ID, name, func(cur *approval.Request) error {
						return cur.Review(reviewer(name), tc.verdict(i), "", "", t0.Add(time.Minute))
					})
					switch {
					case err == nil:
						mu.Lock()
						winners = append(winners, name)
						mu.Unlock()
					case !isLost(err):
						t.Errorf("review by %s = %v, want nil, ErrResolved or ErrConflict", name, err)
					}
				})
			}
			close(start)
			wg.Wait()
			if len(winners) != tc.wantWins {
				t.Fatalf("%d winners %v, want %d", len(winners), winners, tc.wantWins)
			}

			got := mustGet(t, s, r.ID)
			var reviewers []string
			for _, rv := range got.Reviews {
				reviewers = append(reviewers, rv.By)
			}
			if diff := cmp.Diff(winners, reviewers, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("stored reviewers differ from winners (-winners +stored):\n%s", diff)
			}
			last := got.Reviews[len(got.Reviews)-1]
			wantState := approval.StateApproved
			if last.Verdict == approval.VerdictDeny {
				wantState = approval.StateDenied
			}
			if got.State != wantState || got.DecidedBy != last.By {
				t.Errorf("state %s decided by %q, want %s by %q", got.State, got.DecidedBy, wantState, last.By)
			}
			wantTypes := []approval.EventType{approval.EventRequested}
			for range tc.wantWins {
				wantTypes = append(wantTypes, approval.EventReviewed)
			}
			wantTypes = append(wantTypes, approval.EventType(wantState))
			if diff := cmp.Diff(wantTypes, types(eventsOf(allEvents(t, s), r.ID))); diff != "" {
				t.Errorf("events mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

var errBoom = errors.New("storetest: boom")

// boomError is a typed error: errors.As must find it in what UpdateRequest
// returns.
type boomError struct{ Detail string }

func (e *boomError) Error() string { return "storetest: boom: " + e.Detail }

// testFnErrorWritesNothing checks that when fn fails, after mutating its
// argument or not, nothing is stored and fn's error comes back.
func testFnErrorWritesNothing(t *testing.T, s store.Store) {
	tests := []struct {
		name  string
		fn    func(*approval.Request) error
		check func(error) bool
	}{
		{"sentinel after mutating", func(r *approval.Request) error {
			r.State = approval.StateDenied
			r.Reason = "changed"
			r.HeldBy = "gw-9"
			r.Reviews = append(r.Reviews, approval.Review{By: "bob", Verdict: approval.VerdictDeny, At: t0})
			return fmt.Errorf("wrapped: %w", errBoom)
		}, func(err error) bool { return errors.Is(err, errBoom) }},
		{"typed error", func(r *approval.Request) error {
			r.LeaseUntil = t0.Add(time.Hour)
			return &boomError{Detail: "typed"}
		}, func(err error) bool {
			var be *boomError
			return errors.As(err, &be) && be.Detail == "typed"
		}},
		{"transition refused", func(r *approval.Request) error {
			return r.Review(reviewer("desktop"), approval.VerdictApprove, "", "", t0.Add(time.Minute))
		}, func(err error) bool { return errors.Is(err, approval.ErrSelfReview) }},
		{"error after a valid transition", func(r *approval.Request) error {
			if err := r.Review(reviewer("bob"), approval.VerdictApprove, "", "", t0.Add(time.Minute)); err != nil {
				return err
			}
			return errBoom
		}, func(err error) bool { return errors.Is(err, errBoom) }},
	}
	for n, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := pending(id(1, n))
			mustCreate(t, s, r)
			_, err := s.UpdateRequest(t.Context(), r.ID, "bob", tc.fn)
			if err == nil || !tc.check(err) {
				t.Fatalf("UpdateRequest = %v, want fn's error", err)
			}
			diffRequests(t, "GetRequest after a failed update", r, mustGet(t, s, r.ID))
			if got := types(eventsOf(allEvents(t, s), r.ID)); !cmp.Equal(got, []approval.EventType{approval.EventRequested}) {
				t.Errorf("events = %v, want only requested", got)
			}
		})
	}
}

// sweep is one sweeper pass as the gate runs it: list what is due, then
// expire each through UpdateRequest. It returns the ids it expired.
func sweep(t *testing.T, s store.Store, actor string, now time.Time) []approval.ID {
	t.Helper()
	ids, err := s.Due(t.Context(), now, 0)
	if err != nil {
		t.Errorf("Due = %v", err)
		return nil
	}
	var expired []approval.ID
	for _, i := range ids {
		_, err := s.UpdateRequest(t.Context(), i, actor, func(r *approval.Request) error { return r.Expire(now) })
		switch {
		case err == nil:
			expired = append(expired, i)
		case errors.Is(err, approval.ErrResolved), errors.Is(err, approval.ErrNotDue):
		default:
			t.Errorf("expire %s = %v", i, err)
		}
	}
	return expired
}

// testExpiryNeverOverwritesDecision runs 4 concurrent sweepers past a
// request's deadline: the pending request expires exactly once, and decided
// requests keep their decision.
func testExpiryNeverOverwritesDecision(t *testing.T, s store.Store) {
	approvedID, deniedID, pendingID := id(1, 1), id(1, 2), id(1, 3)
	for _, i := range []approval.ID{approvedID, deniedID, pendingID} {
		mustCreate(t, s, pending(i)) // expires at t0+10m; approvals valid 10m
	}
	mustReview(t, s, approvedID, "bob", approval.VerdictApprove, t0.Add(time.Minute))
	mustReview(t, s, deniedID, "bob", approval.VerdictDeny, t0.Add(time.Minute))
	approved, denied := mustGet(t, s, approvedID), mustGet(t, s, deniedID)

	now := t0.Add(10*time.Minute + 30*time.Second) // past the deadline, within valid_for
	var (
		mu      sync.Mutex
		expired []approval.ID
		start   = make(chan struct{})
		wg      sync.WaitGroup
	)
	for i := range 4 {
		wg.Go(func() {
			<-start
			ids := sweep(t, s, fmt.Sprint("sweeper-", i), now)
			mu.Lock()
			expired = append(expired, ids...)
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	if diff := cmp.Diff([]approval.ID{pendingID}, expired); diff != "" {
		t.Errorf("expired by the sweepers (-want +got):\n%s", diff)
	}
	if got := mustGet(t, s, pendingID); got.State != approval.StateExpired {
		t.Errorf("pending past its deadline is %s, want expired", got.State)
	}
	diffRequests(t, "approved request after the sweep", approved, mustGet(t, s, approvedID))
	diffRequests(t, "denied request after the sweep", denied, mustGet(t, s, deniedID))

	// Expiring a decision directly is refused and writes nothing.
	if _, err := s.UpdateRequest(t.Context(), approvedID, "sweeper", func(r *approval.Request) error { return r.Expire(now) }); !errors.Is(err, approval.ErrNotDue) {
		t.Errorf("Expire(approved within valid_for) = %v, want ErrNotDue", err)
	}
	if _, err := s.UpdateRequest(t.Context(), deniedID, "sweeper", func(r *approval.Request) error { return r.Expire(now) }); !errors.Is(err, approval.ErrResolved) {
		t.Errorf("Expire(denied) = %v, want ErrResolved", err)
	}

	// Once valid_for has passed, the unused approval expires, once.
	later := t0.Add(11 * time.Minute)
	if got := sweep(t, s, "sweeper-late", later); !cmp.Equal(got, []approval.ID{approvedID}) {
		t.Errorf("late sweep expired %v, want [%s]", got, approvedID)
	}
	evs := allEvents(t, s)
	for _, c := range []struct {
		id   approval.ID
		want int
	}{{pendingID, 1}, {approvedID, 1}, {deniedID, 0}} {
		n := 0
		for _, ev := range eventsOf(evs, c.id) {
			if ev.Type == approval.EventExpired {
				n++
			}
		}
		if n != c.want {
			t.Errorf("%s has %d expired events, want %d", c.id, n, c.want)
		}
	}
	if got := mustGet(t, s, deniedID); got.State != approval.StateDenied {
		t.Errorf("denied request is %s after the late sweep", got.State)
	}
}

func testDue(t *testing.T, s store.Store) {
	now := t0.Add(10 * time.Minute)
	review := func(v approval.Verdict) func(*approval.Request) error {
		return func(r *approval.Request) error {
			return r.Review(reviewer("bob"), v, "", "", t0.Add(time.Minute))
		}
	}
	tests := []struct {
		name    string
		expires time.Duration // after t0
		valid   time.Duration
		update  func(*approval.Request) error // nil stays pending
		due     bool
	}{
		{"pending at its deadline", 10 * time.Minute, 10 * time.Minute, nil, true},
		{"pending 1ms before its deadline", 10*time.Minute + time.Millisecond, 10 * time.Minute, nil, false},
		{"pending past its deadline", 5 * time.Minute, 10 * time.Minute, nil, true},
		{"approved past valid_for", 5 * time.Minute, 5 * time.Minute, review(approval.VerdictApprove), true},
		{"approved at the end of valid_for", 20 * time.Minute, 9 * time.Minute, review(approval.VerdictApprove), true},
		{"approved within valid_for", 5 * time.Minute, 9*time.Minute + time.Millisecond, review(approval.VerdictApprove), false},
		{"approved without valid_for", 5 * time.Minute, 0, review(approval.VerdictApprove), false},
		{"denied past its deadline", 5 * time.Minute, 10 * time.Minute, review(approval.VerdictDeny), false},
		{"consumed", 5 * time.Minute, 10 * time.Minute, func(r *approval.Request) error {
			if err := review(approval.VerdictApprove)(r); err != nil {
				return err
			}
			return r.Consume(r.Binding(), "", t0.Add(2*time.Minute))
		}, false},
		{"expired", 5 * time.Minute, 10 * time.Minute, func(r *approval.Request) error { return r.Expire(t0.Add(5 * time.Minute)) }, false},
		{"consumed, dispatcher's lease lapsed", 5 * time.Minute, 10 * time.Minute, consumedHeld(t0.Add(10 * time.Minute)), true},
		{"consumed, dispatcher's lease live", 5 * time.Minute, 10 * time.Minute, consumedHeld(t0.Add(10*time.Minute + time.Millisecond)), false},
		{"consumed with an outcome", 5 * time.Minute, 10 * time.Minute, func(r *approval.Request) error {
			if err := consumedHeld(t0.Add(time.Minute))(r); err != nil {
				return err
			}
			return r.RecordOutcome(approval.OutcomeOK)
		}, false},
		{"cancelled", 5 * time.Minute, 10 * time.Minute, func(r *approval.Request) error { return r.Cancel(t0.Add(time.Minute)) }, false},
	}
	var want []approval.ID
	for n, tc := range tests {
		r := pending(id(1, n))
		r.ExpiresAt = t0.Add(tc.expires)
		r.ValidFor = tc.valid
		mustCreate(t, s, r)
		if tc.update != nil {
			mustUpdate(t, s, r.ID, "bob", tc.update)
		}
		if tc.due {
			want = append(want, r.ID)
		}
		t.Logf("%s: %s", r.ID, tc.name)
	}
	got, err := s.Due(t.Context(), now, 0)
	if err != nil {
		t.Fatalf("Due = %v", err)
	}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Due(t0+10m) mismatch (-want +got; see the log for names):\n%s", diff)
	}
	got, err = s.Due(t.Context(), now, 2)
	if err != nil {
		t.Fatalf("Due(limit 2) = %v", err)
	}
	if len(got) != 2 || !slices.Contains(want, got[0]) || !slices.Contains(want, got[1]) || got[0] == got[1] {
		t.Errorf("Due(limit 2) = %v, want 2 of %v", got, want)
	}
	if got, err := s.Due(t.Context(), t0, 0); err != nil || len(got) != 0 {
		t.Errorf("Due(t0) = %v, %v; want nothing due", got, err)
	}
}

// testEvents follows one request through its life and checks the log:
// one event per change, with the actor, the committed state and the time
// the request records for it; changes without a transition write none.
func testEvents(t *testing.T, s store.Store) {
	r := pending(id(1, 1))
	r.RequiredApprovals = 2
	other := pending(id(1, 2))
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }

	mustCreate(t, s, r)
	mustReview(t, s, r.ID, "bob", approval.VerdictApprove, at(1))
	mustCreate(t, s, other)
	mustUpdate(t, s, r.ID, "gw-1", func(*approval.Request) error { return nil })
	mustUpdate(t, s, r.ID, "gw-1", func(cur *approval.Request) error { cur.Renew("gw-1", at(2)); return nil })
	mustReview(t, s, r.ID, "alice", approval.VerdictApprove, at(2))
	mustUpdate(t, s, r.ID, "gw-1", func(cur *approval.Request) error { return cur.Consume(cur.Binding(), "", at(3)) })
	mustUpdate(t, s, r.ID, "gw-1", func(cur *approval.Request) error { return cur.RecordOutcome(approval.OutcomeOK) })
	mustUpdate(t, s, other.ID, "desktop", func(cur *approval.Request) error { return cur.Cancel(at(4)) })

	ev := func(i approval.ID, typ approval.EventType, st approval.State, actor string, when time.Time) approval.Event {
		return approval.Event{RequestID: i, Type: typ, State: st, Actor: actor, At: when}
	}
	want := []approval.Event{
		ev(r.ID, approval.EventRequested, approval.StatePending, "desktop", t0),
		ev(r.ID, approval.EventReviewed, approval.StatePending, "bob", at(1)),
		ev(other.ID, approval.EventRequested, approval.StatePending, "desktop", t0),
		ev(r.ID, approval.EventReviewed, approval.StateApproved, "alice", at(2)),
		ev(r.ID, approval.EventApproved, approval.StateApproved, "alice", at(2)),
		ev(r.ID, approval.EventConsumed, approval.StateConsumed, "gw-1", at(3)),
		// The request records no time for these two: the backend's clock.
		ev(r.ID, approval.EventDispatched, approval.StateConsumed, "gw-1", time.Time{}),
		ev(other.ID, approval.EventCancelled, approval.StateCancelled, "desktop", time.Time{}),
	}
	got := allEvents(t, s)
	for i := range got {
		if i < len(want) && want[i].At.IsZero() {
			if got[i].At.IsZero() {
				t.Errorf("event %d (%s) has no time", i, got[i].Type)
			}
			got[i].At = time.Time{}
		}
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(approval.Event{}, "Seq")); diff != "" {
		t.Fatalf("events mismatch (-want +got):\n%s", diff)
	}

	page, err := s.Events(t.Context(), got[1].Seq, 3)
	if err != nil {
		t.Fatalf("Events(after %d, 3) = %v", got[1].Seq, err)
	}
	if diff := cmp.Diff(got[2:5], page); diff != "" {
		t.Errorf("Events(after the 2nd, 3) mismatch (-want +got):\n%s", diff)
	}
	if page, err := s.Events(t.Context(), got[len(got)-1].Seq, 0); err != nil || len(page) != 0 {
		t.Errorf("Events(after the last) = %v, %v; want none", page, err)
	}
}

// consumedHeld approves and consumes a request whose dispatcher holds a
// lease until the given time.
func consumedHeld(until time.Time) func(*approval.Request) error {
	return func(r *approval.Request) error {
		if err := r.Review(reviewer("bob"), approval.VerdictApprove, "", "", t0.Add(time.Minute)); err != nil {
			return err
		}
		if err := r.Consume(r.Binding(), "", t0.Add(2*time.Minute)); err != nil {
			return err
		}
		r.Renew("gw-1", until)
		return nil
	}
}

func testOpenIdentical(t *testing.T, s store.Store) {
	const hash = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	mk := func(n int, mutate func(*approval.Request), update func(*approval.Request) error) approval.ID {
		r := pending(id(1, n))
		r.ArgumentsHash = hash
		if mutate != nil {
			mutate(&r)
		}
		mustCreate(t, s, r)
		if update != nil {
			mustUpdate(t, s, r.ID, "bob", update)
		}
		return r.ID
	}
	deny := func(r *approval.Request) error {
		return r.Review(reviewer("bob"), approval.VerdictDeny, "no", "", t0.Add(time.Minute))
	}
	approve := func(r *approval.Request) error {
		return r.Review(reviewer("bob"), approval.VerdictApprove, "", "", t0.Add(time.Minute))
	}
	want := []approval.ID{
		mk(1, nil, nil),     // pending
		mk(2, nil, approve), // approved
		mk(3, nil, deny),    // denied, not answered
	}
	mk(4, nil, func(r *approval.Request) error { // denied and answered
		if err := deny(r); err != nil {
			return err
		}
		return r.Answer(t0.Add(2 * time.Minute))
	})
	mk(5, nil, func(r *approval.Request) error { return r.Cancel(t0) })
	mk(6, nil, consumedHeld(t0.Add(time.Hour)))
	mk(7, nil, func(r *approval.Request) error { return r.Expire(t0.Add(time.Hour)) })
	mk(8, func(r *approval.Request) { r.RequestedBy = "other" }, nil)
	mk(9, func(r *approval.Request) { r.Tool = "refund" }, nil)
	mk(10, func(r *approval.Request) { r.Server = "bank" }, nil)
	mk(11, func(r *approval.Request) {
		r.ArgumentsHash = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	}, nil)

	got, err := s.OpenIdentical(t.Context(), "desktop", "pay", "transfer", hash)
	if err != nil {
		t.Fatalf("OpenIdentical = %v", err)
	}
	var ids []approval.ID
	for _, r := range got {
		ids = append(ids, r.ID)
	}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("OpenIdentical ids (-want +got):\n%s", diff)
	}
	if len(got) == 3 && (got[0].State != approval.StatePending || got[1].State != approval.StateApproved || got[2].State != approval.StateDenied) {
		t.Errorf("states %s %s %s", got[0].State, got[1].State, got[2].State)
	}
}
