package sqlstore

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/pgtest"
)

// pgExec runs DDL or a statement of a test on db's admin pool.
func pgExec(t *testing.T, db *DB, q string, args ...any) {
	t.Helper()
	if _, err := db.asql.ExecContext(t.Context(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// assertUntouched checks that request id is still pending and that the
// log holds only its "requested" event: a failed write left nothing.
func assertUntouched(t *testing.T, db *DB, id approval.ID) {
	t.Helper()
	r, err := db.GetRequest(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != approval.StatePending || len(r.Reviews) != 0 {
		t.Errorf("request after the failed write: %s with %d reviews, want pending with none", r.State, len(r.Reviews))
	}
	evs, err := db.Events(t.Context(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Type != approval.EventRequested {
		t.Errorf("events after the failed write: %+v, want only the request's requested event", evs)
	}
}

func approveFn(r *approval.Request) error {
	return r.Review(approval.Reviewer{ID: "alice"}, approval.VerdictApprove, "", "", t0.Add(time.Minute))
}

// TestPipelinedWriteCommitsNothingWhenItsUpdateMisses: the UPDATE of a
// pipelined write (pgUpdateRequest) is sent with its events and the
// COMMIT before its row count is read. When it updates no row (here a
// trigger drops it; under the row lock nothing else can), the guard must
// fail the transaction so that the COMMIT commits nothing: not the events,
// not a notification. Without the guard the events of a decision that
// was never stored would be committed.
func TestPipelinedWriteCommitsNothingWhenItsUpdateMisses(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	id := testID(1)
	if err := db.CreateRequest(t.Context(), pendingRequest(id)); err != nil {
		t.Fatal(err)
	}
	pgExec(t, db, `CREATE FUNCTION drop_update() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$`)
	pgExec(t, db, `CREATE TRIGGER drop_update BEFORE UPDATE ON requests FOR EACH ROW EXECUTE FUNCTION drop_update()`)
	_, err := db.UpdateRequest(t.Context(), id, "alice", approveFn)
	if err == nil || !strings.Contains(err.Error(), "changed under its lock") {
		t.Fatalf("UpdateRequest whose UPDATE misses = %v, want the request changed under its lock", err)
	}
	assertUntouched(t, db, id)
}

// TestPipelinedWriteCommitsNothingWhenALaterStatementFails: the events'
// INSERT of a pipelined write fails after its UPDATE succeeded; the COMMIT
// in the same pipeline must not commit the UPDATE (an error skips the
// rest of the pipeline and aborts the transaction), and the connection
// goes back to the pool usable.
func TestPipelinedWriteCommitsNothingWhenALaterStatementFails(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	id := testID(1)
	if err := db.CreateRequest(t.Context(), pendingRequest(id)); err != nil {
		t.Fatal(err)
	}
	pgExec(t, db, `CREATE FUNCTION refuse_review() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'refused by the test'; END $$`)
	pgExec(t, db, `CREATE TRIGGER refuse_review BEFORE INSERT ON events FOR EACH ROW
		WHEN (NEW.type = 'reviewed') EXECUTE FUNCTION refuse_review()`)
	_, err := db.UpdateRequest(t.Context(), id, "alice", approveFn)
	if err == nil || !strings.Contains(err.Error(), "refused by the test") {
		t.Fatalf("UpdateRequest whose events fail = %v, want the trigger's error", err)
	}
	assertUntouched(t, db, id)
	pgExec(t, db, `DROP TRIGGER refuse_review ON events`)
	got, err := db.UpdateRequest(t.Context(), id, "alice", approveFn)
	if err != nil || got.State != approval.StateApproved {
		t.Fatalf("UpdateRequest after the failure = %s, %v; want approved", got.State, err)
	}
}

// TestPipelinedRecordDispatchIsOneTransaction: RecordDispatch's outcome and
// its ledger result go in one pipeline; a failure of the ledger's INSERT
// records neither.
func TestPipelinedRecordDispatchIsOneTransaction(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	id := testID(1)
	if err := db.CreateRequest(t.Context(), pendingRequest(id)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.UpdateRequest(t.Context(), id, "alice", approveFn); err != nil {
		t.Fatal(err)
	}
	if _, err := db.UpdateRequest(t.Context(), id, "toolgate", func(r *approval.Request) error {
		return r.Consume(r.Binding(), "", t0.Add(2*time.Minute))
	}); err != nil {
		t.Fatal(err)
	}
	pgExec(t, db, `CREATE FUNCTION refuse_result() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'result refused by the test'; END $$`)
	pgExec(t, db, `CREATE TRIGGER refuse_result BEFORE INSERT ON approval_results FOR EACH ROW EXECUTE FUNCTION refuse_result()`)
	res := store.Result{RequestID: id, Result: json.RawMessage(`{"ok":true}`), RecordedAt: t0.Add(3 * time.Minute), ExpiresAt: t0.Add(time.Hour)}
	record := func() error {
		_, err := db.RecordDispatch(t.Context(), res, "toolgate", func(r *approval.Request) error {
			return r.RecordOutcome(approval.OutcomeOK)
		})
		return err
	}
	if err := record(); err == nil || !strings.Contains(err.Error(), "result refused by the test") {
		t.Fatalf("RecordDispatch whose result fails = %v, want the trigger's error", err)
	}
	if r, err := db.GetRequest(t.Context(), id); err != nil || r.DispatchOutcome != "" {
		t.Fatalf("outcome after the failed RecordDispatch = %q, %v; want none", r.DispatchOutcome, err)
	}
	if _, err := db.GetResult(t.Context(), id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetResult after the failed RecordDispatch = %v, want not found", err)
	}
	pgExec(t, db, `DROP TRIGGER refuse_result ON approval_results`)
	if err := record(); err != nil {
		t.Fatal(err)
	}
	if r, err := db.GetRequest(t.Context(), id); err != nil || r.DispatchOutcome != approval.OutcomeOK {
		t.Fatalf("outcome = %q, %v; want ok", r.DispatchOutcome, err)
	}
	if _, err := db.GetResult(t.Context(), id); err != nil {
		t.Fatalf("GetResult = %v", err)
	}
}

// TestPipelinedWriteAfterTheServerDroppedItsConnections: a pipelined write
// takes its connection without the pool's ping. When the server has
// closed the pool's idle connections meanwhile (a restart, a failover,
// an administrator), the first pipeline finds the connection broken
// before anything was written, and the write is tried again on a pinged
// connection: the decision succeeds, as it did when every connection was
// pinged first.
func TestPipelinedWriteAfterTheServerDroppedItsConnections(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	ids := []approval.ID{testID(1), testID(2)}
	for _, id := range ids {
		if err := db.CreateRequest(t.Context(), pendingRequest(id)); err != nil {
			t.Fatal(err)
		}
	}
	// Warm the pool with a pipelined write of its own.
	if _, err := db.UpdateRequest(t.Context(), ids[0], "alice", approveFn); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.asql.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = $1) AS k`, PoolApplicationName).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no pool connection to terminate")
	}
	got, err := db.UpdateRequest(t.Context(), ids[1], "alice", approveFn)
	if err != nil || got.State != approval.StateApproved {
		t.Fatalf("UpdateRequest after the server closed the pool's connections = %s, %v; want approved", got.State, err)
	}
}

// TestGuardedWriteInPostgresForm: pgGuardedWrite's statement comes with
// Postgres's placeholders, the same text dollarPlaceholders made of the
// concatenation it was built as before, so the pipeline rewrites nothing
// (a request write built it and then rewrote it: two allocations of the
// statement, ≈ 1.3 KB per approval).
func TestGuardedWriteInPostgresForm(t *testing.T) {
	pg := &postgresDialect{}
	p := approvalPlan(t)
	q, args := pgGuardedWrite(pg, p)
	ins, _ := eventsInsert(p.events)
	want := dollarPlaceholders(`WITH upd AS (` + p.update + ` RETURNING 1), ins AS (` + ins + `) SELECT 1 / (SELECT count(*) FROM upd), NULL, NULL, NULL, NULL`)
	if q != want {
		t.Errorf("pgGuardedWrite =\n%s\nwant\n%s", q, want)
	}
	if strings.Contains(q, "?") || strings.Count(q, "$") != len(args) {
		t.Errorf("pgGuardedWrite's statement has %d ? and %d $ for %d arguments; want no ? and one $ each", strings.Count(q, "?"), strings.Count(q, "$"), len(args))
	}
}

// approvalPlan is the write plan of request 1's approval by alice: a
// change with events, the guarded write's usual shape.
func approvalPlan(t *testing.T) storePlan {
	t.Helper()
	old, err := encodeRequest(pendingRequest(testID(1)))
	if err != nil {
		t.Fatal(err)
	}
	cur := pendingRequest(testID(1))
	if err := approveFn(&cur); err != nil {
		t.Fatal(err)
	}
	p, err := planStore(old, cur, "alice", t0.Add(time.Minute))
	if err != nil || !p.changed || len(p.events) == 0 {
		t.Fatalf("planStore = changed %v, %d events, %v; want a change with events", p.changed, len(p.events), err)
	}
	return p
}
