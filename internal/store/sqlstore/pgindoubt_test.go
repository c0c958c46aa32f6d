package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
)

// approvedSessionRequest creates a session and a request of its principal
// (so that its consume goes through inTx: UpdateRequestWithChain), and
// approves it; n numbers both.
func approvedSessionRequest(t *testing.T, db *DB, n int) approval.ID {
	t.Helper()
	ctx := t.Context()
	s := session.Session{ID: session.ID(fmt.Sprintf("s%d", n)), Principal: session.PrincipalID(session.ID(fmt.Sprintf("s%d", n))),
		TokenHash: fmt.Sprintf("%064x", n), Mode: session.ModeDefault, Revision: 1, CreatedAt: t0, CreatedBy: "host"}
	if err := db.CreateSession(ctx, s, "host"); err != nil {
		t.Fatal(err)
	}
	r := pendingRequest(testID(n))
	r.RequestedBy = s.Principal
	r.CreatedAt, r.ExpiresAt = time.Now(), time.Now().Add(time.Hour)
	if err := db.CreateRequest(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, err := db.UpdateRequest(ctx, r.ID, "bob", func(r *approval.Request) error {
		return r.Review(approval.Reviewer{ID: "bob"}, approval.VerdictApprove, "", "", time.Now())
	}); err != nil {
		t.Fatal(err)
	}
	return r.ID
}

// consumeWithChain is the gate's consume of a session's call: the chain
// read under the row lock, then the compare-and-set to consumed.
func consumeWithChain(ctx context.Context, db *DB, id approval.ID) (approval.Request, error) {
	return db.UpdateRequestWithChain(ctx, id, "toolgate", func(r *approval.Request, c session.Chain) error {
		deny := ""
		if c.Revoked() {
			deny = "session revoked"
		}
		return r.Consume(r.Binding(), deny, time.Now())
	})
}

// TestInTxCommitAnswerLost: a write of inTx (Postgres: pgTxOnce) whose
// COMMIT reached the server and committed, and whose answer was lost with
// the connection (cut before the CommandComplete, or after it in place of
// the ReadyForQuery), reports success: the consume of a session's call
// returns it consumed, for its caller to dispatch once; a policy revision
// returns the revision stored. Before, both reported an error although
// they stood: the consume left an approved call consumed and undispatched
// unless its caller retried and recognised its token, and a retried policy
// write found its base revision moved (409) by its own commit.
func TestInTxCommitAnswerLost(t *testing.T) {
	for _, at := range []cutAt{cutBeforeAnswer, cutBeforeReady} {
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			db, proxy := openThroughCommitLoser(t, 0)
			ctx := t.Context()

			id := approvedSessionRequest(t, db, 1)
			notesSent(db) // no notification of an earlier write is sent through the armed proxy
			proxy.arm(at)
			got, err := consumeWithChain(ctx, db, id)
			if n := proxy.lost.Load(); n != 1 {
				t.Fatalf("connections cut at COMMIT = %d, want 1 (the consume's)", n)
			}
			if err != nil || got.State != approval.StateConsumed {
				t.Errorf("consume whose COMMIT's answer was lost = %s, %v; want consumed, nil (it committed)", got.State, err)
			}
			if cur, err := db.GetRequest(ctx, id); err != nil || cur.State != approval.StateConsumed {
				t.Fatalf("GetRequest = %s, %v; want consumed", cur.State, err)
			}

			notesSent(db) // no notification of an earlier write is sent through the armed proxy
			proxy.arm(at)
			rev, err := db.AppendPolicy(ctx, 0, store.PolicyRevision{Policy: "default: deny\n", Digest: "sha256:01", CreatedAt: t0}, "ops-admin")
			if n := proxy.lost.Load(); n != 2 {
				t.Fatalf("connections cut at COMMIT = %d, want 2 (and the policy's)", n)
			}
			if err != nil || rev.Revision != 1 {
				t.Errorf("AppendPolicy whose COMMIT's answer was lost = revision %d, %v; want 1, nil (it committed)", rev.Revision, err)
			}
			if cur, err := db.CurrentPolicy(ctx); err != nil || cur.Revision != 1 {
				t.Fatalf("CurrentPolicy = revision %d, %v; want 1", cur.Revision, err)
			}
		})
	}
}

// TestInTxCommitNeverReached: a COMMIT lost before it reached the server
// (the client sees the same: the connection ends without an answer) is
// settled as aborted: the write reports the connection's error, as
// unavailable and not in doubt, and nothing of it is stored, so that its
// retry writes it once.
func TestInTxCommitNeverReached(t *testing.T) {
	db, proxy := openThroughCommitLoser(t, 0)
	ctx := t.Context()

	id := approvedSessionRequest(t, db, 1)
	notesSent(db) // no notification of an earlier write is sent through the armed proxy
	proxy.arm(cutBeforeServer)
	_, err := consumeWithChain(ctx, db, id)
	if n := proxy.lost.Load(); n != 1 {
		t.Fatalf("connections cut at COMMIT = %d, want 1 (the consume's)", n)
	}
	if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrInDoubt) {
		t.Errorf("consume whose COMMIT never reached the server = %v; want unavailable, not in doubt", err)
	}
	if cur, err := db.GetRequest(ctx, id); err != nil || cur.State != approval.StateApproved {
		t.Fatalf("GetRequest = %s, %v; want still approved", cur.State, err)
	}
	if got, err := consumeWithChain(ctx, db, id); err != nil || got.State != approval.StateConsumed {
		t.Errorf("consume again = %s, %v; want consumed", got.State, err)
	}
}

// TestInTxCommitInDoubt: when the COMMIT's answer was lost and Postgres
// cannot be asked afterwards (every new connection fails), the write
// reports store.ErrInDoubt with store.ErrUnavailable (failing closed, as
// before, but saying that it may stand), and it did commit.
func TestInTxCommitInDoubt(t *testing.T) {
	db, proxy := openThroughCommitLoser(t, 1) // one connection: the settling read needs a new one
	ctx := t.Context()

	id := approvedSessionRequest(t, db, 1)
	proxy.refuse.Store(true)
	notesSent(db) // no notification of an earlier write is sent through the armed proxy
	proxy.arm(cutBeforeAnswer)
	_, err := consumeWithChain(ctx, db, id)
	proxy.refuse.Store(false)
	if n := proxy.lost.Load(); n != 1 {
		t.Fatalf("connections cut at COMMIT = %d, want 1 (the consume's)", n)
	}
	if !errors.Is(err, store.ErrInDoubt) || !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("consume whose outcome cannot be read = %v; want in doubt and unavailable", err)
	}
	if cur, err := db.GetRequest(ctx, id); err != nil || cur.State != approval.StateConsumed {
		t.Fatalf("GetRequest = %s, %v; want consumed (it committed)", cur.State, err)
	}
}

func (at cutAt) String() string {
	switch at {
	case cutBeforeReady:
		return "beforeReady"
	case cutBeforeAnswer:
		return "beforeAnswer"
	case cutBeforeServer:
		return "beforeServer"
	case cutBeforeExecute:
		return "beforeExecute"
	}
	return fmt.Sprintf("cutAt(%d)", int32(at))
}

// TestPipelinedCommitAnswerLost: a pipelined request write
// (pgUpdateRequest: a decision, the consume of a call without a session)
// whose COMMIT reached the server and committed, and whose answer was lost
// with the connection before its CommandComplete, reports success.
// TestCommitAnsweredThenConnectionLost covers a loss after that answer.
func TestPipelinedCommitAnswerLost(t *testing.T) {
	db, proxy := openThroughCommitLoser(t, 0)
	ctx := t.Context()
	r := pendingRequest(testID(1))
	r.CreatedAt, r.ExpiresAt = time.Now(), time.Now().Add(time.Hour)
	if err := db.CreateRequest(ctx, r); err != nil {
		t.Fatal(err)
	}

	notesSent(db) // no notification of an earlier write is sent through the armed proxy
	proxy.arm(cutBeforeAnswer)
	got, err := db.UpdateRequest(ctx, r.ID, "bob", func(r *approval.Request) error {
		return r.Review(approval.Reviewer{ID: "bob"}, approval.VerdictApprove, "", "", time.Now())
	})
	if n := proxy.lost.Load(); n != 1 {
		t.Fatalf("connections cut at COMMIT = %d, want 1 (the decision's)", n)
	}
	if err != nil || got.State != approval.StateApproved {
		t.Errorf("decision whose COMMIT's answer was lost = %s, %v; want approved, nil (it committed)", got.State, err)
	}

	notesSent(db) // no notification of an earlier write is sent through the armed proxy
	proxy.arm(cutBeforeAnswer)
	got, err = db.UpdateRequest(ctx, r.ID, "toolgate", func(r *approval.Request) error {
		return r.Consume(r.Binding(), "", time.Now())
	})
	if n := proxy.lost.Load(); n != 2 {
		t.Fatalf("connections cut at COMMIT = %d, want 2 (and the consume's)", n)
	}
	if err != nil || got.State != approval.StateConsumed {
		t.Errorf("consume whose COMMIT's answer was lost = %s, %v; want consumed, nil (it committed)", got.State, err)
	}
	if cur, err := db.GetRequest(ctx, r.ID); err != nil || cur.State != approval.StateConsumed {
		t.Fatalf("GetRequest = %s, %v; want consumed", cur.State, err)
	}
}
