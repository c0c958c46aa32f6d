package sqlstore

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// createCaps are the gate's caps of a principal that is no session's, so
// that CreateRequest takes the pipelined path (pgCreate).
var createCaps = []store.Cap{
	{Scope: store.CapPrincipal, Key: "desktop", Limit: 8, Name: "own"},
	{Scope: store.CapTotal, Limit: 100, Name: "total"},
}

// freshRequest is a pending request numbered n, created now.
func freshRequest(n int) approval.Request {
	r := pendingRequest(testID(n))
	r.CreatedAt, r.ExpiresAt = time.Now(), time.Now().Add(time.Hour)
	return r
}

// TestPGCreateCommitAnswerLost: the pipelined creation (pgCreate) whose
// COMMIT reached the server and committed, and whose answer was lost with
// the connection, reports success: the request stands pending for its
// approvers. Before, it reported the connection's error (unavailable), and
// the gate denied a call whose request stood.
func TestPGCreateCommitAnswerLost(t *testing.T) {
	db, proxy := openThroughCommitLoser(t, 0)
	ctx := t.Context()
	r := freshRequest(1)
	notesSent(db) // no notification of an earlier write is sent through the armed proxy
	proxy.arm(cutBeforeAnswer)
	err := db.CreateRequest(ctx, r, createCaps...)
	if n := proxy.lost.Load(); n != 1 {
		t.Fatalf("connections cut at COMMIT = %d, want 1 (the creation's)", n)
	}
	if err != nil {
		t.Errorf("CreateRequest whose COMMIT's answer was lost = %v, want nil (it committed)", err)
	}
	if got, err := db.GetRequest(ctx, r.ID); err != nil || got.State != approval.StatePending {
		t.Fatalf("GetRequest = %s, %v; want pending", got.State, err)
	}
}

// TestPGCreateNeverRan: a pipelined creation cut before the server ran
// any of it (the client sees the same as a lost answer) is settled as not
// written once the writer's server process ended: the connection's error,
// unavailable and not in doubt, nothing stored, and the retry creates it.
func TestPGCreateNeverRan(t *testing.T) {
	db, proxy := openThroughCommitLoser(t, 0)
	ctx := t.Context()
	r := freshRequest(1)
	notesSent(db) // no notification of an earlier write is sent through the armed proxy
	proxy.arm(cutBeforeExecute)
	err := db.CreateRequest(ctx, r, createCaps...)
	if n := proxy.lost.Load(); n != 1 {
		t.Fatalf("connections cut = %d, want 1 (the creation's)", n)
	}
	if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrInDoubt) {
		t.Errorf("CreateRequest that never ran = %v; want unavailable, not in doubt", err)
	}
	if _, err := db.GetRequest(ctx, r.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetRequest = %v; want not found", err)
	}
	if err := db.CreateRequest(ctx, r, createCaps...); err != nil {
		t.Errorf("CreateRequest again = %v, want nil", err)
	}
}

// TestPGCreateCommitInDoubt: when the creation's answer was lost and
// Postgres cannot be asked afterwards, CreateRequest reports
// store.ErrInDoubt with store.ErrUnavailable; it did commit.
func TestPGCreateCommitInDoubt(t *testing.T) {
	db, proxy := openThroughCommitLoser(t, 1) // one connection: the settling read needs a new one
	ctx := t.Context()
	r := freshRequest(1)
	proxy.refuse.Store(true)
	notesSent(db) // no notification of an earlier write is sent through the armed proxy
	proxy.arm(cutBeforeAnswer)
	err := db.CreateRequest(ctx, r, createCaps...)
	proxy.refuse.Store(false)
	if n := proxy.lost.Load(); n != 1 {
		t.Fatalf("connections cut at COMMIT = %d, want 1 (the creation's)", n)
	}
	if !errors.Is(err, store.ErrInDoubt) || !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("CreateRequest whose outcome cannot be read = %v; want in doubt and unavailable", err)
	}
	if got, err := db.GetRequest(ctx, r.ID); err != nil || got.State != approval.StatePending {
		t.Fatalf("GetRequest = %s, %v; want pending (it committed)", got.State, err)
	}
}

// TestPGOutcomeAnswerLost: RecordOutcome's one statement, which commits at
// its Sync before its answer is sent, whose answer was lost with the
// connection (before the answer, or in place of the ReadyForQuery after
// it), reports the outcome recorded. Before, it reported the connection's
// error although the outcome stood.
func TestPGOutcomeAnswerLost(t *testing.T) {
	for _, at := range []cutAt{cutBeforeAnswer, cutBeforeReady} {
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			db, proxy := openThroughCommitLoser(t, 0)
			ctx := t.Context()
			id := testID(1)
			consumedRequest(t, db, id)
			proxy.anyStatement.Store(true)
			notesSent(db) // no notification of an earlier write is sent through the armed proxy
			proxy.arm(at)
			err := db.RecordOutcome(ctx, id, approval.OutcomeOK, nil, "toolgate")
			if n := proxy.lost.Load(); n != 1 {
				t.Fatalf("connections cut at the statement's answer = %d, want 1 (the outcome's)", n)
			}
			if err != nil {
				t.Errorf("RecordOutcome whose answer was lost = %v; want nil (it committed)", err)
			}
			if cur, err := db.GetRequest(ctx, id); err != nil || cur.DispatchOutcome != approval.OutcomeOK {
				t.Fatalf("GetRequest = %q, %v; want outcome ok", cur.DispatchOutcome, err)
			}
		})
	}
}

// TestPGOutcomeNeverRan: RecordOutcome's statement cut before the server
// ran it is settled as not written: unavailable, not in doubt, no outcome,
// and the retry records it.
func TestPGOutcomeNeverRan(t *testing.T) {
	db, proxy := openThroughCommitLoser(t, 0)
	ctx := t.Context()
	id := testID(1)
	consumedRequest(t, db, id)
	notesSent(db) // no notification of an earlier write is sent through the armed proxy
	proxy.arm(cutBeforeExecute)
	err := db.RecordOutcome(ctx, id, approval.OutcomeOK, nil, "toolgate")
	if n := proxy.lost.Load(); n != 1 {
		t.Fatalf("connections cut = %d, want 1 (the outcome's)", n)
	}
	if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrInDoubt) {
		t.Errorf("RecordOutcome that never ran = %v; want unavailable, not in doubt", err)
	}
	if cur, err := db.GetRequest(ctx, id); err != nil || cur.DispatchOutcome != approval.OutcomeNone {
		t.Fatalf("GetRequest = %q, %v; want no outcome", cur.DispatchOutcome, err)
	}
	if err := db.RecordOutcome(ctx, id, approval.OutcomeOK, nil, "toolgate"); err != nil {
		t.Errorf("RecordOutcome again = %v; want nil", err)
	}
	if cur, err := db.GetRequest(ctx, id); err != nil || cur.DispatchOutcome != approval.OutcomeOK {
		t.Errorf("GetRequest after RecordOutcome again = %q, %v; want outcome ok", cur.DispatchOutcome, err)
	}
}

// TestPGOutcomeInDoubt: when RecordOutcome's answer was lost and Postgres
// cannot be asked afterwards, it reports store.ErrInDoubt with
// store.ErrUnavailable; the outcome was recorded.
func TestPGOutcomeInDoubt(t *testing.T) {
	db, proxy := openThroughCommitLoser(t, 1)
	ctx := t.Context()
	id := testID(1)
	consumedRequest(t, db, id)
	proxy.anyStatement.Store(true)
	proxy.refuse.Store(true)
	notesSent(db) // no notification of an earlier write is sent through the armed proxy
	proxy.arm(cutBeforeAnswer)
	err := db.RecordOutcome(ctx, id, approval.OutcomeOK, nil, "toolgate")
	proxy.refuse.Store(false)
	proxy.anyStatement.Store(false)
	if n := proxy.lost.Load(); n != 1 {
		t.Fatalf("connections cut at the statement's answer = %d, want 1 (the outcome's)", n)
	}
	if !errors.Is(err, store.ErrInDoubt) || !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("RecordOutcome whose outcome cannot be read = %v; want in doubt and unavailable", err)
	}
	if cur, err := db.GetRequest(ctx, id); err != nil || cur.DispatchOutcome != approval.OutcomeOK {
		t.Fatalf("GetRequest = %q, %v; want outcome ok (it committed)", cur.DispatchOutcome, err)
	}
}
