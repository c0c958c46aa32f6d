package approval

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

const (
	hashA   = "sha256:aaaa"
	hashB   = "sha256:bbbb"
	digestA = "sha256:d1"
)

// pending returns a pending request made at t0 that expires at t0+10m.
func pending(opts ...func(*Request)) Request {
	r := Request{
		ID:                "01900000-0000-7000-8000-000000000001",
		State:             StatePending,
		Server:            "pay",
		Tool:              "transfer",
		ArgumentsHash:     hashA,
		ToolDigest:        digestA,
		Rule:              "payments",
		Mode:              "hold",
		RequestedBy:       "agent-1",
		OnBehalfOf:        "alice",
		CreatedAt:         t0,
		ExpiresAt:         t0.Add(10 * time.Minute),
		RequiredApprovals: 1,
		ValidFor:          5 * time.Minute,
	}
	for _, o := range opts {
		o(&r)
	}
	return r
}

// approved returns a request approved by bob at t0+1m, valid until t0+6m.
func approved(opts ...func(*Request)) Request {
	return pending(append([]func(*Request){func(r *Request) {
		r.State = StateApproved
		r.Reviews = []Review{{By: "bob", Verdict: VerdictApprove, Reason: "ok", At: t0.Add(time.Minute)}}
		r.DecidedBy = "bob"
		r.DecidedAt = t0.Add(time.Minute)
		r.Reason = "ok"
	}}, opts...)...)
}

func inState(s State) func(*Request) { return func(r *Request) { r.State = s } }

func clone(r Request) Request {
	r.Reviews = slices.Clone(r.Reviews)
	r.Approvers = slices.Clone(r.Approvers)
	r.DisplayWarnings = slices.Clone(r.DisplayWarnings)
	r.Arguments = slices.Clone(r.Arguments)
	return r
}

type transitionCase struct {
	name    string
	before  Request
	op      func(r *Request) error
	wantErr error
	// want edits a copy of before into the expected result; nil means
	// before must be left unchanged.
	want func(r *Request)
}

func runTransitions(t *testing.T, tests []transitionCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := clone(tt.before)
			err := tt.op(&got)
			if tt.wantErr == nil && err != nil {
				t.Fatalf("error = %v, want nil", err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("error = %v, want %v", err, tt.wantErr)
			}
			want := clone(tt.before)
			if tt.want != nil {
				tt.want(&want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("request mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func review(rv Reviewer, v Verdict, reason, pin string, now time.Time) func(*Request) error {
	return func(r *Request) error { return r.Review(rv, v, reason, pin, now) }
}

func TestReview(t *testing.T) {
	bob := Reviewer{ID: "bob"}
	carol := Reviewer{ID: "carol", Groups: []string{"ops"}}
	t1 := t0.Add(time.Minute)
	t2 := t0.Add(2 * time.Minute)
	two := func(r *Request) { r.RequiredApprovals = 2 }
	bobApproved := func(r *Request) {
		r.Reviews = []Review{{By: "bob", Verdict: VerdictApprove, Reason: "ok", At: t1}}
	}
	tests := []transitionCase{
		{
			name:   "approve settles with one required",
			before: pending(),
			op:     review(bob, VerdictApprove, "looks fine", "", t1),
			want: func(r *Request) {
				r.Reviews = []Review{{By: "bob", Verdict: VerdictApprove, Reason: "looks fine", At: t1}}
				r.State, r.DecidedBy, r.DecidedAt, r.Reason = StateApproved, "bob", t1, "looks fine"
			},
		},
		{
			name:   "zero required approvals counts as one",
			before: pending(func(r *Request) { r.RequiredApprovals = 0 }),
			op:     review(bob, VerdictApprove, "", "", t1),
			want: func(r *Request) {
				r.Reviews = []Review{{By: "bob", Verdict: VerdictApprove, At: t1}}
				r.State, r.DecidedBy, r.DecidedAt = StateApproved, "bob", t1
			},
		},
		{
			name:   "deny settles",
			before: pending(),
			op:     review(bob, VerdictDeny, "too much", "", t1),
			want: func(r *Request) {
				r.Reviews = []Review{{By: "bob", Verdict: VerdictDeny, Reason: "too much", At: t1}}
				r.State, r.DecidedBy, r.DecidedAt, r.Reason = StateDenied, "bob", t1, "too much"
			},
		},
		{
			name:   "first of two approvals stays pending",
			before: pending(two),
			op:     review(bob, VerdictApprove, "ok", "", t1),
			want:   bobApproved,
		},
		{
			name:   "second distinct approval settles, last reviewer decides",
			before: pending(two, bobApproved),
			op:     review(carol, VerdictApprove, "fine by me", "", t2),
			want: func(r *Request) {
				r.Reviews = append(r.Reviews, Review{By: "carol", Verdict: VerdictApprove, Reason: "fine by me", At: t2})
				r.State, r.DecidedBy, r.DecidedAt, r.Reason = StateApproved, "carol", t2, "fine by me"
			},
		},
		{
			name:   "deny after an approval settles denied",
			before: pending(two, bobApproved),
			op:     review(carol, VerdictDeny, "no", "", t2),
			want: func(r *Request) {
				r.Reviews = append(r.Reviews, Review{By: "carol", Verdict: VerdictDeny, Reason: "no", At: t2})
				r.State, r.DecidedBy, r.DecidedAt, r.Reason = StateDenied, "carol", t2, "no"
			},
		},
		{
			name:    "same reviewer, same verdict while pending",
			before:  pending(two, bobApproved),
			op:      review(bob, VerdictApprove, "again", "", t2),
			wantErr: ErrDuplicate,
		},
		{
			name:    "same reviewer, same verdict after settling",
			before:  approved(),
			op:      review(bob, VerdictApprove, "", "", t2),
			wantErr: ErrDuplicate,
		},
		{
			name:    "same reviewer, same verdict after expiry",
			before:  approved(inState(StateExpired)),
			op:      review(bob, VerdictApprove, "", "", t0.Add(time.Hour)),
			wantErr: ErrDuplicate,
		},
		{
			name:    "same reviewer, other verdict while pending",
			before:  pending(two, bobApproved),
			op:      review(bob, VerdictDeny, "changed my mind", "", t2),
			wantErr: ErrConflict,
		},
		{
			name:    "same reviewer, other verdict after settling",
			before:  approved(),
			op:      review(bob, VerdictDeny, "", "", t2),
			wantErr: ErrConflict,
		},
		{
			name:    "new reviewer on a denied request",
			before:  pending(func(r *Request) { r.State = StateDenied }),
			op:      review(carol, VerdictApprove, "", "", t1),
			wantErr: ErrResolved,
		},
		{
			name:    "at the deadline",
			before:  pending(),
			op:      review(bob, VerdictApprove, "", "", t0.Add(10*time.Minute)),
			wantErr: ErrExpired,
		},
		{
			name:    "after the deadline",
			before:  pending(),
			op:      review(bob, VerdictDeny, "", "", t0.Add(time.Hour)),
			wantErr: ErrExpired,
		},
		{
			name:    "requester reviews",
			before:  pending(),
			op:      review(Reviewer{ID: "agent-1"}, VerdictApprove, "", "", t1),
			wantErr: ErrSelfReview,
		},
		{
			name:    "the person the agent acts for reviews",
			before:  pending(),
			op:      review(Reviewer{ID: "alice", Groups: []string{"ops"}}, VerdictApprove, "", "", t1),
			wantErr: ErrSelfReview,
		},
		{
			name:    "empty reviewer id never matches an empty OnBehalfOf",
			before:  pending(func(r *Request) { r.OnBehalfOf = "" }),
			op:      review(Reviewer{}, VerdictApprove, "", "", t1),
			wantErr: ErrNotEligible,
		},
		{
			name:    "not listed",
			before:  pending(func(r *Request) { r.Approvers = []string{"carol", "group:ops"} }),
			op:      review(Reviewer{ID: "bob", Groups: []string{"dev"}}, VerdictApprove, "", "", t1),
			wantErr: ErrNotEligible,
		},
		{
			name:    "id spelled like a group entry is not the group",
			before:  pending(func(r *Request) { r.Approvers = []string{"group:ops"} }),
			op:      review(Reviewer{ID: "group:ops"}, VerdictApprove, "", "", t1),
			wantErr: ErrNotEligible,
		},
		{
			name:    "empty group entry matches nobody",
			before:  pending(func(r *Request) { r.Approvers = []string{"group:"} }),
			op:      review(Reviewer{ID: "bob", Groups: []string{""}}, VerdictApprove, "", "", t1),
			wantErr: ErrNotEligible,
		},
		{
			name:   "eligible by group",
			before: pending(func(r *Request) { r.Approvers = []string{"dave", "group:ops"} }),
			op:     review(carol, VerdictApprove, "", "", t1),
			want: func(r *Request) {
				r.Reviews = []Review{{By: "carol", Verdict: VerdictApprove, At: t1}}
				r.State, r.DecidedBy, r.DecidedAt = StateApproved, "carol", t1
			},
		},
		{
			name:   "eligible by id",
			before: pending(func(r *Request) { r.Approvers = []string{"bob"} }),
			op:     review(bob, VerdictDeny, "", "", t1),
			want: func(r *Request) {
				r.Reviews = []Review{{By: "bob", Verdict: VerdictDeny, At: t1}}
				r.State, r.DecidedBy, r.DecidedAt = StateDenied, "bob", t1
			},
		},
		{
			name:    "pinned hash differs",
			before:  pending(),
			op:      review(bob, VerdictApprove, "", hashB, t1),
			wantErr: ErrHashMismatch,
		},
		{
			name:   "pinned hash matches",
			before: pending(),
			op:     review(bob, VerdictApprove, "", hashA, t1),
			want: func(r *Request) {
				r.Reviews = []Review{{By: "bob", Verdict: VerdictApprove, At: t1}}
				r.State, r.DecidedBy, r.DecidedAt = StateApproved, "bob", t1
			},
		},
		{
			name:    "invalid verdict",
			before:  pending(),
			op:      review(bob, Verdict("maybe"), "", "", t1),
			wantErr: ErrInvalidVerdict,
		},
		// The order of checks.
		{
			name:    "resolved before expired and self review",
			before:  pending(inState(StateCancelled)),
			op:      review(Reviewer{ID: "agent-1"}, VerdictApprove, "", "", t0.Add(time.Hour)),
			wantErr: ErrResolved,
		},
		{
			name:    "expired before self review",
			before:  pending(),
			op:      review(Reviewer{ID: "agent-1"}, VerdictApprove, "", "", t0.Add(time.Hour)),
			wantErr: ErrExpired,
		},
		{
			name:    "on_behalf_of matches without case",
			before:  pending(func(r *Request) { r.OnBehalfOf = "Alice" }),
			op:      review(Reviewer{ID: "alice"}, VerdictApprove, "", "", t1),
			wantErr: ErrSelfReview,
		},
		{
			name:    "self review before eligibility",
			before:  pending(func(r *Request) { r.Approvers = []string{"carol"} }),
			op:      review(Reviewer{ID: "alice"}, VerdictApprove, "", "", t1),
			wantErr: ErrSelfReview,
		},
		{
			name:    "eligibility before hash",
			before:  pending(func(r *Request) { r.Approvers = []string{"carol"} }),
			op:      review(bob, VerdictApprove, "", hashB, t1),
			wantErr: ErrNotEligible,
		},
	}
	for _, s := range []State{StateApproved, StateDenied, StateExpired, StateCancelled, StateConsumed, StateInvalidated} {
		tests = append(tests, transitionCase{
			name:    "new reviewer in state " + string(s),
			before:  pending(inState(s)),
			op:      review(carol, VerdictApprove, "", "", t1),
			wantErr: ErrResolved,
		})
	}
	runTransitions(t, tests)
}

func TestCancel(t *testing.T) {
	tests := []transitionCase{{
		name:   "pending",
		before: pending(),
		op:     func(r *Request) error { return r.Cancel(t0.Add(time.Minute)) },
		want:   func(r *Request) { r.State, r.Reason = StateCancelled, ReasonCancelled },
	}}
	for _, s := range []State{StateApproved, StateDenied, StateExpired, StateCancelled, StateConsumed, StateInvalidated} {
		tests = append(tests, transitionCase{
			name:    string(s),
			before:  approved(inState(s)),
			op:      func(r *Request) error { return r.Cancel(t0.Add(time.Minute)) },
			wantErr: ErrResolved,
		})
	}
	runTransitions(t, tests)
}

func TestWithdraw(t *testing.T) {
	withdraw := func(r *Request) error { return r.Withdraw(t0.Add(time.Minute)) }
	tests := []transitionCase{
		{name: "pending", before: pending(), op: withdraw, want: func(r *Request) { r.State, r.Reason = StateCancelled, ReasonCancelled }},
		{name: "approved, not consumed", before: approved(), op: withdraw, want: func(r *Request) { r.State, r.Reason = StateCancelled, ReasonCancelled }},
	}
	for _, s := range []State{StateDenied, StateExpired, StateCancelled, StateConsumed, StateInvalidated} {
		tests = append(tests, transitionCase{name: string(s), before: approved(inState(s)), op: withdraw, wantErr: ErrResolved})
	}
	runTransitions(t, tests)
}

func TestExpire(t *testing.T) {
	expire := func(now time.Time) func(*Request) error {
		return func(r *Request) error { return r.Expire(now) }
	}
	tests := []transitionCase{
		{
			name:   "pending at the deadline",
			before: pending(),
			op:     expire(t0.Add(10 * time.Minute)),
			want:   func(r *Request) { r.State, r.Reason = StateExpired, ReasonTimedOut },
		},
		{
			name:   "pending past the deadline",
			before: pending(),
			op:     expire(t0.Add(time.Hour)),
			want:   func(r *Request) { r.State, r.Reason = StateExpired, ReasonTimedOut },
		},
		{
			name:    "pending before the deadline",
			before:  pending(),
			op:      expire(t0.Add(10*time.Minute - time.Millisecond)),
			wantErr: ErrNotDue,
		},
		{
			name:   "approved, unused at the end of valid_for",
			before: approved(),
			op:     expire(t0.Add(6 * time.Minute)),
			want:   func(r *Request) { r.State, r.Reason = StateExpired, ReasonUnusedApproval },
		},
		{
			name:    "approved, still valid",
			before:  approved(),
			op:      expire(t0.Add(6*time.Minute - time.Millisecond)),
			wantErr: ErrNotDue,
		},
		{
			name:    "approved without valid_for never expires by time",
			before:  approved(func(r *Request) { r.ValidFor = 0 }),
			op:      expire(t0.Add(1000 * time.Hour)),
			wantErr: ErrNotDue,
		},
	}
	for _, s := range []State{StateDenied, StateExpired, StateCancelled, StateConsumed, StateInvalidated} {
		tests = append(tests, transitionCase{
			name:    string(s),
			before:  approved(inState(s)),
			op:      expire(t0.Add(1000 * time.Hour)),
			wantErr: ErrResolved,
		})
	}
	runTransitions(t, tests)
}

func TestValidUntil(t *testing.T) {
	tests := []struct {
		name string
		r    Request
		want time.Time
	}{
		{"approved", approved(), t0.Add(6 * time.Minute)},
		{"no valid_for", approved(func(r *Request) { r.ValidFor = 0 }), time.Time{}},
		{"not decided", pending(), time.Time{}},
	}
	for _, tt := range tests {
		if got := tt.r.ValidUntil(); !got.Equal(tt.want) {
			t.Errorf("%s: ValidUntil = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestConsume(t *testing.T) {
	t2 := t0.Add(2 * time.Minute)
	call := Binding{Principal: "agent-1", Server: "pay", Tool: "transfer", ArgumentsHash: hashA, ToolDigest: digestA}
	with := func(edit func(*Binding)) Binding {
		b := call
		edit(&b)
		return b
	}
	consume := func(b Binding, deniedBy string, now time.Time) func(*Request) error {
		return func(r *Request) error { return r.Consume(b, deniedBy, now) }
	}
	invalidated := func(reason string) func(*Request) {
		return func(r *Request) { r.State, r.Reason = StateInvalidated, reason }
	}
	tests := []transitionCase{
		{
			name:   "matching call",
			before: approved(),
			op:     consume(call, "", t2),
			want:   func(r *Request) { r.State, r.ConsumedAt = StateConsumed, t2 },
		},
		{
			name:   "no valid_for",
			before: approved(func(r *Request) { r.ValidFor = 0 }),
			op:     consume(call, "", t0.Add(1000*time.Hour)),
			want:   func(r *Request) { r.State, r.ConsumedAt = StateConsumed, t0.Add(1000*time.Hour) },
		},
		{
			name:   "at the end of valid_for",
			before: approved(),
			op:     consume(call, "", t0.Add(6*time.Minute)),
			want:   invalidated(ReasonNoLongerValid),
		},
		{
			name:   "other principal",
			before: approved(),
			op:     consume(with(func(b *Binding) { b.Principal = "agent-2" }), "", t2),
			want:   invalidated(ReasonPrincipal),
		},
		{
			name:   "other server",
			before: approved(),
			op:     consume(with(func(b *Binding) { b.Server = "pay2" }), "", t2),
			want:   invalidated(ReasonServer),
		},
		{
			name:   "other tool",
			before: approved(),
			op:     consume(with(func(b *Binding) { b.Tool = "refund" }), "", t2),
			want:   invalidated(ReasonTool),
		},
		{
			name:   "arguments changed",
			before: approved(),
			op:     consume(with(func(b *Binding) { b.ArgumentsHash = hashB }), "", t2),
			want:   invalidated("arguments changed since approval"),
		},
		{
			name:   "tool definition changed",
			before: approved(),
			op:     consume(with(func(b *Binding) { b.ToolDigest = "sha256:d2" }), "", t2),
			want:   invalidated("tool definition changed since approval"),
		},
		{
			name:   "policy now denies",
			before: approved(),
			op:     consume(call, "never delete", t2),
			want:   invalidated(`policy now denies the call (rule "never delete")`),
		},
		// The order of checks.
		{
			name:   "validity before binding",
			before: approved(),
			op:     consume(with(func(b *Binding) { b.ArgumentsHash = hashB }), "r", t0.Add(time.Hour)),
			want:   invalidated(ReasonNoLongerValid),
		},
		{
			name:   "arguments before tool digest",
			before: approved(),
			op:     consume(with(func(b *Binding) { b.ArgumentsHash, b.ToolDigest = hashB, "x" }), "r", t2),
			want:   invalidated(ReasonArguments),
		},
		{
			name:   "binding before policy",
			before: approved(),
			op:     consume(with(func(b *Binding) { b.ToolDigest = "x" }), "r", t2),
			want:   invalidated(ReasonToolDefinition),
		},
	}
	for _, s := range []State{StatePending, StateDenied, StateExpired, StateCancelled, StateConsumed, StateInvalidated} {
		tests = append(tests, transitionCase{
			name:    "state " + string(s),
			before:  approved(inState(s)),
			op:      consume(call, "", t2),
			wantErr: ErrNotApproved,
		})
	}
	runTransitions(t, tests)
}

func TestRecordOutcome(t *testing.T) {
	consumed := approved(func(r *Request) { r.State, r.ConsumedAt = StateConsumed, t0.Add(2*time.Minute) })
	record := func(o Outcome) func(*Request) error {
		return func(r *Request) error { return r.RecordOutcome(o) }
	}
	tests := []transitionCase{
		{
			name:    "approved",
			before:  approved(),
			op:      record(OutcomeOK),
			wantErr: ErrResolved,
		},
		{
			name:    "invalidated",
			before:  approved(inState(StateInvalidated)),
			op:      record(OutcomeOK),
			wantErr: ErrResolved,
		},
		{
			name:    "outcome already recorded",
			before:  clone(consumed),
			op:      func(r *Request) error { r.DispatchOutcome = OutcomeUnknown; return r.RecordOutcome(OutcomeOK) },
			wantErr: ErrResolved,
			want:    func(r *Request) { r.DispatchOutcome = OutcomeUnknown },
		},
	}
	for _, o := range []Outcome{OutcomeOK, OutcomeToolError, OutcomeTransportError, OutcomeCancelledAfterDispatch, OutcomeUnknown} {
		tests = append(tests, transitionCase{
			name:   "consumed " + string(o),
			before: consumed,
			op:     record(o),
			want:   func(r *Request) { r.DispatchOutcome = o },
		})
	}
	runTransitions(t, tests)
	for _, o := range []Outcome{OutcomeNone, "exploded"} {
		r := clone(consumed)
		if err := r.RecordOutcome(o); err == nil || errors.Is(err, ErrResolved) || r.DispatchOutcome != OutcomeNone {
			t.Errorf("RecordOutcome(%q) = %v, outcome %q; want a plain error and no change", o, err, r.DispatchOutcome)
		}
	}
}

func TestLease(t *testing.T) {
	t1 := t0.Add(time.Minute)
	lease := t0.Add(30 * time.Second)
	held := func(r *Request) { r.HeldBy, r.LeaseUntil = "gw-1", lease }
	tests := []transitionCase{
		{
			name:   "renew takes the hold",
			before: pending(),
			op:     func(r *Request) error { r.Renew("gw-1", lease); return nil },
			want:   held,
		},
		{
			name:   "renew extends",
			before: pending(held),
			op:     func(r *Request) error { r.Renew("gw-1", t1); return nil },
			want:   func(r *Request) { r.LeaseUntil = t1 },
		},
		{
			name:   "release by the holder ends the lease now",
			before: pending(held),
			op:     func(r *Request) error { r.Release("gw-1", t0.Add(time.Second)); return nil },
			want:   func(r *Request) { r.LeaseUntil = t0.Add(time.Second) },
		},
		{
			name:   "release by another instance does nothing",
			before: pending(held),
			op:     func(r *Request) error { r.Release("gw-2", t0); return nil },
		},
		{
			name:   "release never extends an ended lease",
			before: pending(held),
			op:     func(r *Request) error { r.Release("gw-1", t1); return nil },
		},
		{
			name:   "release with no holder does nothing",
			before: pending(),
			op:     func(r *Request) error { r.Release("", t0); return nil },
		},
	}
	runTransitions(t, tests)

	lapsed := []struct {
		name string
		r    Request
		now  time.Time
		want bool
	}{
		{"never held", pending(), t0, true},
		{"held", pending(held), t0, false},
		{"at lease end", pending(held), lease, true},
		{"after lease end", pending(held), t1, true},
	}
	for _, tt := range lapsed {
		if got := tt.r.LeaseLapsed(tt.now); got != tt.want {
			t.Errorf("%s: LeaseLapsed = %v, want %v", tt.name, got, tt.want)
		}
	}
}
