package sqlstore

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/pgtest"
)

// TestCrashBeforeNotifyDispatchesOnce: instance B decides a call held on
// instance A and dies between the decision's commit and its notification
// (pgNotifier sends after the commit returned; here B's notifier drops
// what it was handed, as a process that ended there never sends it). A's
// watch, which no notification reaches, still learns of the decision from
// the change feed at its safety poll (Config.Poll); A's held call is
// admitted once, its request consumed once, and B, deciding again, finds
// it decided. Without the poll the call would wait for its deadline (an
// hour here: the test's 30 s guard fails first).
func TestCrashBeforeNotifyDispatchesOnce(t *testing.T) {
	dsn := pgtest.Fresh(t)
	dbA := openTest(t, Config{Driver: DriverPostgres, DSN: dsn, Poll: 50 * time.Millisecond})
	dbB := openTest(t, noPoll(dsn))
	var dropped atomic.Int64
	notes := dbB.d.(*postgresDialect).notes
	notes.mu.Lock()
	notes.send = func(_ context.Context, batch []notice) error {
		dropped.Add(int64(len(batch))) // B ended before sending: nothing reaches the wire
		return nil
	}
	notes.mu.Unlock()

	pol := &policy.Policy{
		Default:  policy.Approve,
		Approval: policy.Approval{Timeout: time.Hour, Mode: "hold", Approvals: 1, ValidFor: 10 * time.Minute},
	}
	gA, gB := gate.New(dbA, pol, &gate.Options{}), gate.New(dbB, pol, &gate.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		dbA.Watch(ctx, func(id approval.ID) {
			if id == "" {
				gA.WakeAll()
			} else {
				gA.Wake(id)
			}
		})
	}()
	t.Cleanup(func() { cancel(); <-watched })

	call := gate.Call{Principal: approval.Principal{ID: "agent-1", Kind: "agent"}, Server: "fs", Tool: "write_file",
		ToolDigest: "sha256:d1", Arguments: []byte(`{"path":"/crash","content":"x"}`)}
	admitted := make(chan gate.Admission, 1)
	go func() { admitted <- gA.Admit(ctx, call) }()

	var id approval.ID
	for deadline := time.Now().Add(30 * time.Second); id == ""; {
		rs, _, err := dbB.ListRequests(t.Context(), store.Filter{State: approval.StatePending})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 1 {
			id = rs[0].ID
		} else if time.Now().After(deadline) {
			t.Fatalf("%d pending requests after 30 s, want the held call's one", len(rs))
		}
	}
	bob := approval.Principal{ID: "bob", Kind: "human"}
	if _, err := gB.Review(t.Context(), id, bob, approval.VerdictApprove, "ok", ""); err != nil {
		t.Fatal(err)
	}
	notesSent(dbB)
	if dropped.Load() == 0 {
		t.Fatal("the decision handed B's notifier nothing to drop")
	}

	a := admission(t, "A (a decision whose notification was lost)", admitted)
	if !a.Allowed || a.ApprovalID != id {
		t.Fatalf("A's held call: %+v, want allowed through %s", a, id)
	}
	a.Finish(t.Context(), approval.OutcomeOK)

	if _, err := gB.Review(t.Context(), id, approval.Principal{ID: "carol", Kind: "human"}, approval.VerdictApprove, "again", ""); err == nil {
		t.Error("a second decision on the consumed request was recorded")
	}
	r, err := dbB.GetRequest(t.Context(), id)
	if err != nil || r.State != approval.StateConsumed || r.DispatchOutcome != approval.OutcomeOK {
		t.Fatalf("request %s: %s %q (%v), want consumed, ok", id, r.State, r.DispatchOutcome, err)
	}
	if consumed := consumedEvents(t, dbB, id); consumed != 1 {
		t.Errorf("%s consumed %d times, want once", id, consumed)
	}
}
