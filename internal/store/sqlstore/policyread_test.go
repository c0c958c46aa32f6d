package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/pgtest"
)

// appendTestRevision stores revision base+1 through AppendPolicy.
func appendTestRevision(ctx context.Context, db *DB, base int64) error {
	_, err := db.AppendPolicy(ctx, base, store.PolicyRevision{Policy: "default: deny\n", Digest: fmt.Sprintf("sha256:%02d", base+1), CreatedAt: t0}, "ops-admin")
	return err
}

// TestUpdateRequestReadingPolicyRevision: the read of
// store.TxReads.PolicyRevision is the newest revision number, 0 before
// the first, with and without the chain, on both databases; asking for
// nothing reads nothing (the zero TxRead).
func TestUpdateRequestReadingPolicyRevision(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			ctx := t.Context()
			id := testID(1)
			if err := db.CreateRequest(ctx, pendingRequest(id)); err != nil {
				t.Fatal(err)
			}
			read := func(reads store.TxReads) store.TxRead {
				t.Helper()
				var got store.TxRead
				if _, err := db.UpdateRequestReading(ctx, id, "toolgate", reads, func(_ *approval.Request, r store.TxRead) error {
					got = r
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				return got
			}
			if got := read(store.TxReads{PolicyRevision: true}); got.PolicyRevision != 0 {
				t.Errorf("before any revision: read %d, want 0", got.PolicyRevision)
			}
			for base := range int64(2) {
				if err := appendTestRevision(ctx, db, base); err != nil {
					t.Fatal(err)
				}
			}
			for _, chain := range []bool{false, true} {
				if got := read(store.TxReads{PolicyRevision: true, Chain: chain}); got.PolicyRevision != 2 {
					t.Errorf("after revision 2 (chain %v): read %d, want 2", chain, got.PolicyRevision)
				}
			}
			if got := read(store.TxReads{}); got.PolicyRevision != 0 || got.Chain != nil {
				t.Errorf("reading nothing: %+v, want the zero TxRead", got)
			}
			if b.driver == DriverPostgres {
				// One index entry: MAX over the primary key, read backward
				// (seqscan off stands for a table of many revisions).
				plan := explainPlan(t, db, []string{`SET LOCAL enable_seqscan = off`}, newestRevision)
				t.Logf("plan: %s", plan)
				if !strings.Contains(plan, "Index Only Scan Backward using policy_revisions_pkey") || strings.Contains(plan, "Sort") {
					t.Errorf("the newest revision's read plans %q, want a backward scan of the primary key", plan)
				}
			}
		})
	}
}

// TestConsumeWaitsForRevisionInFlight (Postgres): a revision's writer
// holds the policy lock and has inserted its row, not committed yet, when
// a consume reads the newest revision in its transaction. The consume
// must wait for it (the lock taken shared) and then read the new
// revision (its read's snapshot is taken after the lock): reading without
// the lock, it would see the old revision, commit the consume under it,
// and the revision would commit right after.
func TestConsumeWaitsForRevisionInFlight(t *testing.T) {
	forEachConsumePath(t, consumeWaitsForRevisionInFlight)
}

func consumeWaitsForRevisionInFlight(t *testing.T, reads store.TxReads) {
	t.Helper()
	db, id := approvedUnderRevision1(t)
	ctx := t.Context()

	writer, err := db.asql.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = writer.Rollback() }()
	if _, err := writer.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(lockPolicy)); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.ExecContext(ctx, `INSERT INTO policy_revisions (`+policyColumns+`)
		VALUES (2, 'default: deny', 'sha256:02', 0, 'other-instance', NULL, '[]')`); err != nil {
		t.Fatal(err)
	}

	done := make(chan struct{})
	var (
		seen    int64
		consErr error
	)
	go func() {
		defer close(done)
		_, consErr = db.UpdateRequestReading(ctx, id, "toolgate", reads, func(r *approval.Request, read store.TxRead) error {
			seen = read.PolicyRevision
			if read.PolicyRevision != 1 {
				return errors.New("moved") // what the gate does: roll back
			}
			return r.Consume(r.Binding(), "", t0)
		})
	}()
	waitBlocked(t, db, done)
	if err := writer.Commit(); err != nil {
		t.Fatal(err)
	}
	<-done
	if seen != 2 {
		t.Fatalf("the consume read revision %d, want 2 (committed by the writer it waited for)", seen)
	}
	if consErr == nil {
		t.Fatal("the consume committed under revision 1")
	}
	if r, err := db.GetRequest(ctx, id); err != nil || r.State != approval.StateApproved {
		t.Fatalf("request: %s, %v; want still approved", r.State, err)
	}
}

// TestRevisionWaitsForConsumeInFlight (Postgres) is the other order: a
// consume read revision 1 in its transaction and has not committed when
// another instance appends revision 2. The append must wait for the
// consume (the policy lock it takes exclusively conflicts with the
// consume's shared one): the consume commits under revision 1 before
// revision 2 exists, never after it.
func TestRevisionWaitsForConsumeInFlight(t *testing.T) {
	forEachConsumePath(t, revisionWaitsForConsumeInFlight)
}

func revisionWaitsForConsumeInFlight(t *testing.T, reads store.TxReads) {
	t.Helper()
	db, id := approvedUnderRevision1(t)
	ctx := t.Context()

	var (
		appendErr error
		appended  = make(chan struct{})
		started   bool
	)
	if _, err := db.UpdateRequestReading(ctx, id, "toolgate", reads, func(r *approval.Request, read store.TxRead) error {
		if read.PolicyRevision != 1 {
			return fmt.Errorf("the consume read revision %d, want 1", read.PolicyRevision)
		}
		if !started {
			started = true
			go func() {
				defer close(appended)
				appendErr = appendTestRevision(ctx, db, 1)
			}()
			if err := blockedOrDone(ctx, db, appended); err != nil {
				return fmt.Errorf("append during the consume: %w", err)
			}
		}
		return r.Consume(r.Binding(), "", t0)
	}); err != nil {
		t.Fatal(err)
	}
	<-appended
	if appendErr != nil {
		t.Fatalf("append revision 2 after the consume: %v", appendErr)
	}
}

// forEachConsumePath runs fn as subtests reading the policy revision with
// and without the chain: on Postgres the inTx path and the pipelined one
// (pgUpdateRequest).
func forEachConsumePath(t *testing.T, fn func(t *testing.T, reads store.TxReads)) {
	t.Helper()
	t.Run("pipelined", func(t *testing.T) { fn(t, store.TxReads{PolicyRevision: true}) })
	t.Run("with chain", func(t *testing.T) { fn(t, store.TxReads{PolicyRevision: true, Chain: true}) })
}

// approvedUnderRevision1 returns a fresh Postgres store holding policy
// revision 1 and an approved request, and that request's id.
func approvedUnderRevision1(t *testing.T) (*DB, approval.ID) {
	t.Helper()
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	if err := appendTestRevision(t.Context(), db, 0); err != nil {
		t.Fatal(err)
	}
	id := testID(1)
	if err := db.CreateRequest(t.Context(), pendingRequest(id)); err != nil {
		t.Fatal(err)
	}
	approve(t, db, id, t0)
	return db, id
}
