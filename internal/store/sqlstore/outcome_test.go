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

// consumedRequest creates request id, approves it and consumes it.
func consumedRequest(t *testing.T, db *DB, id approval.ID) {
	t.Helper()
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
}

// TestPostgresOutcomeIsOneStatement: on Postgres RecordOutcome's write is
// the one statement (pgOutcome, pgOutcomeLedger), not the locked read and
// pipeline of updateRequest: it records a consumed request's outcome
// itself, and updates nothing, writing nothing, once the sweeper recorded
// "unknown" (the dispatching process's lease was taken over): its guard.
func TestPostgresOutcomeIsOneStatement(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	pg := db.d.(*postgresDialect)
	res := func(id approval.ID) *store.Result {
		return &store.Result{RequestID: id, Result: json.RawMessage(`{"ok":true}`), RecordedAt: t0.Add(3 * time.Minute), ExpiresAt: t0.Add(time.Hour)}
	}
	for i, rec := range []*store.Result{res(testID(1)), nil} {
		id := testID(i + 1)
		consumedRequest(t, db, id)
		done, err := db.pgRecordOutcome(t.Context(), pg, id, approval.OutcomeOK, rec, "toolgate")
		if err != nil || !done {
			t.Fatalf("pgRecordOutcome (result %v) = %v, %v; want done", rec != nil, done, err)
		}
		if got, err := db.GetRequest(t.Context(), id); err != nil || got.DispatchOutcome != approval.OutcomeOK {
			t.Fatalf("outcome after pgRecordOutcome (result %v) = %q, %v; want ok", rec != nil, got.DispatchOutcome, err)
		}
		if _, err := db.GetResult(t.Context(), id); (err == nil) != (rec != nil) {
			t.Errorf("GetResult after the outcome (result %v) = %v", rec != nil, err)
		}
	}

	id := testID(3)
	consumedRequest(t, db, id)
	if _, err := db.UpdateRequest(t.Context(), id, "toolgate", func(r *approval.Request) error {
		return r.RecordOutcome(approval.OutcomeUnknown)
	}); err != nil {
		t.Fatal(err)
	}
	evs, err := db.Events(t.Context(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range []*store.Result{res(id), nil} {
		done, err := db.pgRecordOutcome(t.Context(), pg, id, approval.OutcomeOK, rec, "toolgate")
		if err != nil || done {
			t.Fatalf("pgRecordOutcome after the sweeper's unknown = %v, %v; want not done, no error", done, err)
		}
	}
	if r, err := db.GetRequest(t.Context(), id); err != nil || r.DispatchOutcome != approval.OutcomeUnknown {
		t.Errorf("outcome after the late writes = %q, %v; want unknown", r.DispatchOutcome, err)
	}
	if _, err := db.GetResult(t.Context(), id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetResult after the late write = %v, want not found", err)
	}
	if after, err := db.Events(t.Context(), 0, 100); err != nil || len(after) != len(evs) {
		t.Errorf("events after the late writes: %d, %v; want %d", len(after), err, len(evs))
	}
}

// TestPostgresOutcomeIsOneTransaction: RecordOutcome's statement writes
// the outcome, its event and the ledger's row all or nothing: when the
// ledger's INSERT fails, neither the outcome nor its event is recorded.
func TestPostgresOutcomeIsOneTransaction(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	id := testID(1)
	consumedRequest(t, db, id)
	evs, err := db.Events(t.Context(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	pgExec(t, db, `CREATE FUNCTION refuse_result() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'result refused by the test'; END $$`)
	pgExec(t, db, `CREATE TRIGGER refuse_result BEFORE INSERT ON approval_results FOR EACH ROW EXECUTE FUNCTION refuse_result()`)
	res := &store.Result{RequestID: id, Result: json.RawMessage(`{"ok":true}`), RecordedAt: t0.Add(3 * time.Minute), ExpiresAt: t0.Add(time.Hour)}
	if err := db.RecordOutcome(t.Context(), id, approval.OutcomeOK, res, "toolgate"); err == nil || !strings.Contains(err.Error(), "result refused by the test") {
		t.Fatalf("RecordOutcome whose result fails = %v, want the trigger's error", err)
	}
	if r, err := db.GetRequest(t.Context(), id); err != nil || r.DispatchOutcome != "" {
		t.Fatalf("outcome after the failed RecordOutcome = %q, %v; want none", r.DispatchOutcome, err)
	}
	if after, err := db.Events(t.Context(), 0, 100); err != nil || len(after) != len(evs) {
		t.Errorf("events after the failed RecordOutcome: %d, %v; want %d", len(after), err, len(evs))
	}
	pgExec(t, db, `DROP TRIGGER refuse_result ON approval_results`)
	if err := db.RecordOutcome(t.Context(), id, approval.OutcomeOK, res, "toolgate"); err != nil {
		t.Fatalf("RecordOutcome = %v; want ok", err)
	}
	if r, err := db.GetRequest(t.Context(), id); err != nil || r.DispatchOutcome != approval.OutcomeOK {
		t.Fatalf("outcome after RecordOutcome = %q, %v; want ok", r.DispatchOutcome, err)
	}
}

// TestPostgresOutcomeAfterTheServerDroppedItsConnections: RecordOutcome
// takes its connection without the pool's ping; when the server closed
// the pool's connections meanwhile, the statement finds its connection
// broken before sending anything and is sent again on a pinged one.
func TestPostgresOutcomeAfterTheServerDroppedItsConnections(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	id := testID(1)
	consumedRequest(t, db, id)
	var n int
	if err := db.asql.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = $1) AS k`, PoolApplicationName).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no pool connection to terminate")
	}
	if err := db.RecordOutcome(t.Context(), id, approval.OutcomeOK, nil, "toolgate"); err != nil {
		t.Fatalf("RecordOutcome after the server closed the pool's connections = %v; want ok", err)
	}
	if got, err := db.GetRequest(t.Context(), id); err != nil || got.DispatchOutcome != approval.OutcomeOK {
		t.Fatalf("outcome after RecordOutcome = %q, %v; want ok", got.DispatchOutcome, err)
	}
}

// TestPostgresOutcomeAnswersItsIdOnly: RecordOutcome's statement on
// Postgres answers, for the row it updated, the id (and NULLs up to
// pgGuardWidth, pgOutcomeSelect), not the whole
// row: RecordOutcome returns no request, and pgx allocates for every
// column of an answer (its description, its value, a Scan destination),
// ≈ 5 KB per outcome for the 34 of requestSelect.
func TestPostgresOutcomeAnswersItsIdOnly(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	pg := db.d.(*postgresDialect)
	id := testID(1)
	consumedRequest(t, db, id)
	rows, err := pg.pool.Query(t.Context(), pgOutcome, string(id), string(approval.OutcomeOK), string(approval.EventDispatched),
		string(approval.StateConsumed), "toolgate", t0.UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, f := range rows.FieldDescriptions() {
		cols = append(cols, f.Name)
	}
	n := 0
	for rows.Next() {
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 1 || len(cols) != pgGuardWidth || cols[0] != "id" {
		t.Fatalf("the outcome's statement answered %d rows of the columns %q; want one row of id and pgGuardWidth's NULLs", n, cols)
	}
	if r, err := db.GetRequest(t.Context(), id); err != nil || r.DispatchOutcome != approval.OutcomeOK {
		t.Fatalf("outcome after the statement = %q, %v; want ok", r.DispatchOutcome, err)
	}
}
