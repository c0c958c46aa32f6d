package gate

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/session"
	"toolgate/internal/store/sqlstore"
)

// quorumPolicy holds fs write_file for approvals from approvers (empty:
// anyone), in mode (hold or retry).
func quorumPolicy(approvals int, mode string, approvers ...string) *policy.Policy {
	p := testPolicy(time.Minute)
	p.Rules = append(p.Rules, policy.Rule{Name: "writes", Server: "fs", Tools: []string{"write_file"}, Effect: policy.Approve,
		Approval: &policy.Approval{Timeout: time.Minute, Mode: mode, Approvals: approvals, Approvers: approvers, ValidFor: 10 * time.Minute}})
	return p
}

// reviewBehind records rv's approval of id in db, as another instance's
// admin API would: the gate learns of it from the store's watcher only,
// so the held call consumes in a transaction of its own.
func reviewBehind(t *testing.T, db *sqlstore.DB, id approval.ID, rv approval.Principal) approval.Request {
	t.Helper()
	r, err := db.UpdateRequest(t.Context(), id, rv.ID, func(r *approval.Request) error {
		return r.Review(approval.Reviewer{ID: rv.ID, Groups: rv.Groups}, approval.VerdictApprove, "ok", "", time.Now())
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// mustInvalidated checks that a was refused with reason want, nothing
// dispatched, the request stored invalidated with that reason and its
// invalidation in the event log.
func mustInvalidated(t *testing.T, db *sqlstore.DB, a Admission, id approval.ID, want string) {
	t.Helper()
	if a.Allowed || !strings.Contains(a.Message, "approval invalidated: "+want) || !strings.Contains(a.Message, "Re-send to request a new approval") {
		t.Fatalf("admission %+v, want a refusal saying %q and that a re-send asks again", a, want)
	}
	got := mustStored(t, db, id)
	if got.State != approval.StateInvalidated || got.Reason != want || got.DispatchOutcome != approval.OutcomeNone {
		t.Fatalf("stored %s %q outcome %q, want invalidated %q, never dispatched", got.State, got.Reason, got.DispatchOutcome, want)
	}
	evs, err := db.Events(t.Context(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var types []approval.EventType
	for _, e := range evs {
		if e.RequestID == id {
			types = append(types, e.Type)
		}
	}
	if len(types) == 0 || types[len(types)-1] != approval.EventInvalidated {
		t.Fatalf("events of %s: %v, want the last one invalidated", id, types)
	}
	for _, ty := range types {
		if ty == approval.EventConsumed || ty == approval.EventDispatched {
			t.Fatalf("events of %s: %v, want no consume", id, types)
		}
	}
}

const raisedReason = `policy now requires 2 approvals from any approver (rule "writes"); 1 of its approvals qualifies`

// (a) An approval by one person, after the policy was raised to two
// approvals (a reload swapped it), no longer runs the held call: its own
// consume (the approval came from elsewhere) invalidates it with the
// reason, in the event log. On a2628f8c the call ran on the old approval.
func TestRaisedQuorumInvalidatesTheHeldCall(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		f := newFixtureOn(t, db, time.Minute, nil)
		f.pol.p.Store(quorumPolicy(1, policy.ModeHold))
		ch := admitAsync(t.Context(), f.gate, writeCall("/raised"))
		r := waitPending(t, db, 1)[0]
		if r.RequiredApprovals != 1 {
			t.Fatalf("required %d, want 1", r.RequiredApprovals)
		}
		f.pol.p.Store(quorumPolicy(2, policy.ModeHold))
		if got := reviewBehind(t, db, r.ID, alice); got.State != approval.StateApproved {
			t.Fatalf("after alice: %s, want approved (the request's own quorum is 1)", got.State)
		}
		mustInvalidated(t, db, recv(t, ch), r.ID, raisedReason)
	})
}

// (a) The same when the decision consumes the call held here in its own
// transaction (Gate.ReviewIf's joined consume).
func TestRaisedQuorumInvalidatesInTheDecision(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		f := newFixtureOn(t, db, time.Minute, nil)
		f.pol.p.Store(quorumPolicy(1, policy.ModeHold))
		offers := signalOffers(f.gate)
		ch := admitAsync(t.Context(), f.gate, writeCall("/joined"))
		r := waitPending(t, db, 1)[0]
		waitOffered(t, offers, r.ID)
		f.pol.p.Store(quorumPolicy(2, policy.ModeHold))
		if _, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		mustInvalidated(t, db, recv(t, ch), r.ID, raisedReason)
	})
}

// (a) A retry-mode call re-sent after its approval, once the policy was
// raised, is not run: the approval is invalidated, and the next re-send
// asks for a new approval under the raised quorum.
func TestRaisedQuorumInvalidatesARetrySend(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		f := newFixtureOn(t, db, time.Minute, nil)
		f.pol.p.Store(quorumPolicy(1, policy.ModeRetry))
		c := writeCall("/retry")
		if a := f.gate.Admit(t.Context(), c); a.Allowed || a.ApprovalID == "" {
			t.Fatalf("first send: %+v, want pending", a)
		}
		r := waitPending(t, db, 1)[0]
		mustReview(t, f.gate, r.ID, approval.VerdictApprove)
		f.pol.p.Store(quorumPolicy(2, policy.ModeRetry))
		mustInvalidated(t, db, f.gate.Admit(t.Context(), c), r.ID, raisedReason)
		a := f.gate.Admit(t.Context(), c)
		if a.Allowed || a.ApprovalID == "" || a.ApprovalID == r.ID {
			t.Fatalf("the next re-send: %+v, want a new pending request", a)
		}
		if n := mustStored(t, db, a.ApprovalID).RequiredApprovals; n != 2 {
			t.Fatalf("the new request needs %d approvals, want 2", n)
		}
	})
}

var (
	aliceOps = approval.Principal{ID: "alice", Kind: "human", Groups: []string{"ops"}}
	carolOps = approval.Principal{ID: "carol", Kind: "human", Groups: []string{"ops"}}
)

// (b) An approver the policy in force no longer names (the rule's
// approvers moved from group:ops to group:finance) does not count: the
// approval is invalidated, none of its approvals qualifying.
func TestApproverNoLongerNamedInvalidates(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		roster := []Reviewer{{ID: "alice", Groups: []string{"ops"}}, {ID: "carol", Groups: []string{"ops"}}, {ID: "fred", Groups: []string{"finance"}}}
		f := newFixtureOn(t, db, time.Minute, &Options{Reviewers: roster})
		f.pol.p.Store(quorumPolicy(1, policy.ModeHold, "group:ops"))
		ch := admitAsync(t.Context(), f.gate, writeCall("/moved"))
		r := waitPending(t, db, 1)[0]
		f.pol.p.Store(quorumPolicy(1, policy.ModeHold, "group:finance"))
		reviewBehind(t, db, r.ID, aliceOps)
		mustInvalidated(t, db, recv(t, ch), r.ID, `policy now requires 1 approval from group:finance (rule "writes"); 0 of its approvals qualify`)
	})
}

// (b) An approver who is no longer one (a restart with another roster:
// alice lost the approver role, carol moved to another tenant) does not
// count when another instance picks up the re-send: of a 2-of-2
// approval, none qualifies. The same approval counts for an instance
// whose roster still lists them (the control).
func TestApproverNoLongerEligibleInvalidates(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		before := []Reviewer{{ID: "alice", Groups: []string{"ops"}}, {ID: "carol", Groups: []string{"ops"}}}
		after := []Reviewer{{ID: "carol", Groups: []string{"ops"}, Tenant: "other"}}
		f := newFixtureOn(t, db, time.Minute, &Options{Instance: "a", Reviewers: before})
		f.pol.p.Store(quorumPolicy(2, policy.ModeRetry, "group:ops"))
		b := New(db, f.pol, &Options{Instance: "b", Reviewers: after})
		c := writeCall("/roster")
		if a := f.gate.Admit(t.Context(), c); a.Allowed || a.ApprovalID == "" {
			t.Fatalf("first send: %+v, want pending", a)
		}
		r := waitPending(t, db, 1)[0]
		for _, p := range []approval.Principal{aliceOps, carolOps} {
			if _, err := f.gate.Review(t.Context(), r.ID, p, approval.VerdictApprove, "ok", ""); err != nil {
				t.Fatal(err)
			}
		}
		mustInvalidated(t, db, b.Admit(t.Context(), c), r.ID, `policy now requires 2 approvals from group:ops (rule "writes"); 0 of its approvals qualify`)

		// The control: the same approvals on an instance with the roster
		// they were given under run the call.
		c2 := writeCall("/roster-kept")
		if a := f.gate.Admit(t.Context(), c2); a.Allowed || a.ApprovalID == "" {
			t.Fatalf("first send: %+v, want pending", a)
		}
		r2 := waitPending(t, db, 1)[0]
		for _, p := range []approval.Principal{aliceOps, carolOps} {
			if _, err := f.gate.Review(t.Context(), r2.ID, p, approval.VerdictApprove, "ok", ""); err != nil {
				t.Fatal(err)
			}
		}
		a := f.gate.Admit(t.Context(), c2)
		if !a.Allowed || a.ApprovalID != r2.ID {
			t.Fatalf("re-send with both approvers eligible: %+v, want allowed", a)
		}
		a.Finish(t.Context(), approval.OutcomeOK)
	})
}

// (c) A policy replaced by one with the same quorum (a reload that
// changed nothing for this rule) runs the approved call, exactly once:
// both approvals qualify, and a re-send after it ran asks again.
func TestUnchangedQuorumStillRunsOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		roster := []Reviewer{{ID: "alice", Groups: []string{"ops"}}, {ID: "carol", Groups: []string{"ops"}}}
		f := newFixtureOn(t, db, time.Minute, &Options{Reviewers: roster})
		f.pol.p.Store(quorumPolicy(2, policy.ModeHold, "group:ops"))
		c := writeCall("/same")
		ch := admitAsync(t.Context(), f.gate, c)
		r := waitPending(t, db, 1)[0]
		if _, err := f.gate.Review(t.Context(), r.ID, aliceOps, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		f.pol.p.Store(quorumPolicy(2, policy.ModeHold, "group:ops")) // reloaded, same quorum
		reviewBehind(t, db, r.ID, carolOps)
		a := recv(t, ch)
		if !a.Allowed || a.ApprovalID != r.ID {
			t.Fatalf("admission %+v, want allowed via %s", a, r.ID)
		}
		a.Finish(t.Context(), approval.OutcomeOK)
		got := mustStored(t, db, r.ID)
		if got.State != approval.StateConsumed || got.DispatchOutcome != approval.OutcomeOK {
			t.Fatalf("stored %s %q, want consumed ok", got.State, got.DispatchOutcome)
		}
		ch2 := admitAsync(t.Context(), f.gate, c)
		r2 := waitPending(t, db, 1)[0]
		if r2.ID == r.ID {
			t.Fatal("the re-send attached to the used approval")
		}
		select {
		case a := <-ch2:
			t.Fatalf("the re-send after the call ran: %+v, want it held for a new approval", a)
		default:
		}
	})
}

// (d) A call held as an MCP task, approved by one after the policy was
// raised to two, is not run: the task ends with the invalidation's reason.
func TestRaisedQuorumInvalidatesATask(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		f := newFixtureOn(t, db, time.Minute, keyed(t, nil))
		f.pol.p.Store(quorumPolicy(1, policy.ModeHold))
		held := make(chan approval.Request, 1)
		c := writeCall("/task")
		c.Task = true
		c.OnHold = func(r approval.Request) { held <- r }
		ch := admitAsync(t.Context(), f.gate, c)
		var r approval.Request
		select {
		case r = <-held:
		case a := <-ch:
			t.Fatalf("Admit returned %+v before holding", a)
		}
		f.pol.p.Store(quorumPolicy(2, policy.ModeHold))
		mustReview(t, f.gate, r.ID, approval.VerdictApprove)
		mustInvalidated(t, db, recv(t, ch), r.ID, raisedReason)
		ts, err := f.gate.Task(t.Context(), f.gate.TaskID(r.ID, agent.ID), agent)
		if err != nil {
			t.Fatal(err)
		}
		if ts.Request.State != approval.StateInvalidated || !strings.Contains(ts.Status, raisedReason) {
			t.Fatalf("task %+v, want invalidated with the reason", ts)
		}
	})
}

// A call only its session's require_approval holds is held for the
// session approval (the policy's default approval): raised from one to
// two after the approval, the re-send is not run. On a2628f8c it ran.
func TestRaisedSessionQuorumInvalidates(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		need := atomic.Int64{}
		need.Store(1)
		sessAp := allowAll().Approval
		sessAp.Mode = policy.ModeRetry
		g := New(db, policy.NewHolder(allowAll()), &Options{ServerExists: knownServers, RetryWait: time.Nanosecond,
			SessionApprovalFunc: func() policy.Approval { ap := sessAp; ap.Approvals = int(need.Load()); return ap }})
		_, p := mustSession(t, g, host, session.NewSession{
			Tools:           []string{"fs"},
			RequireApproval: map[string]session.Requirement{"fs": {Tools: []string{"write_file"}}},
		})
		c := sessionCall(p, "fs", "write_file")
		a := g.Admit(t.Context(), c)
		if a.Allowed || a.ApprovalID == "" {
			t.Fatalf("first send: %+v, want held", a)
		}
		mustReview(t, g, a.ApprovalID, approval.VerdictApprove)
		need.Store(2)
		mustInvalidated(t, db, g.Admit(t.Context(), c), a.ApprovalID,
			`policy now requires 2 approvals from any approver (rule "`+SessionRule+`"); 1 of its approvals qualifies`)
	})
}
