package sqlstore

import (
	"database/sql"
	"strings"
	"testing"
)

// TestEventSubjectIndexesArePartial: events_session and events_grant hold
// only the events of a session or a grant (migration 20), so a request's
// events (four per approval) write no NULL keys into them, and the
// lookups that read them (retention's NOT EXISTS over a session's events,
// the foreign keys' checks of a session or grant row going) still find
// their rows through them.
func TestEventSubjectIndexesArePartial(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			for _, ix := range []struct{ name, column string }{{"events_session", "session_id"}, {"events_grant", "grant_id"}} {
				def := indexDefinition(t, db, ix.name)
				if !strings.Contains(def, "WHERE") || !strings.Contains(strings.ToLower(def), "is not null") {
					t.Errorf("%s = %q, want a partial index WHERE %s IS NOT NULL", ix.name, def, ix.column)
				}
				q := `SELECT 1 FROM events e WHERE e.` + ix.column + ` = ?`
				if plan := lookupPlan(t, db, q, "x"); !strings.Contains(plan, ix.name) {
					t.Errorf("%s is planned as %q, want it through %s", q, plan, ix.name)
				}
				if !foreignKeyCheckUses(t, db, ix.name, ix.column) {
					t.Errorf("the foreign key check of events.%s does not read %s", ix.column, ix.name)
				}
			}
		})
	}
}

// indexDefinition returns the SQL that defines the index named name.
func indexDefinition(t *testing.T, db *DB, name string) string {
	t.Helper()
	q := `SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?`
	if db.Driver() == DriverPostgres {
		q = `SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND indexname = $1`
	}
	var def string
	if err := db.sql.QueryRowContext(t.Context(), q, name).Scan(&def); err != nil {
		t.Fatalf("index %s: %v", name, err)
	}
	return def
}

// lookupPlan returns the plan of q with args: SQLite's EXPLAIN QUERY
// PLAN, or Postgres's EXPLAIN with sequential scans switched off (an
// empty table is read whole otherwise, which says nothing about whether
// the index can serve the query).
func lookupPlan(t *testing.T, db *DB, q string, args ...any) string {
	t.Helper()
	if db.Driver() != DriverPostgres {
		return queryPlan(t, db, q, args...)
	}
	return explainPlan(t, db, []string{`SET LOCAL enable_seqscan = off`}, db.d.rebind(q), args...)
}

// explainPlan is Postgres's EXPLAIN of q with args (lines trimmed and
// joined by "; ") after the statements sets, in a transaction rolled back
// after: lookupPlan's and outcomePlan's.
func explainPlan(t *testing.T, db *DB, sets []string, q string, args ...any) string {
	t.Helper()
	tx, err := db.sql.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, set := range sets {
		if _, err := tx.ExecContext(t.Context(), set); err != nil {
			t.Fatalf("%s: %v", set, err)
		}
	}
	rows, err := tx.QueryContext(t.Context(), "EXPLAIN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, strings.TrimSpace(line))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "; ")
}

// foreignKeyCheckUses reports whether the check for events rows that
// still name a session or grant being deleted (column) reads the index
// name. SQLite: the DELETE's program opens the index (its root page) for
// reading. Postgres: the statement its referential integrity trigger runs
// (ri_triggers.c: SELECT 1 FROM ONLY … WHERE $1 = col FOR KEY SHARE),
// planned generically, as the trigger's saved plan is, names the index.
func foreignKeyCheckUses(t *testing.T, db *DB, name, column string) bool {
	t.Helper()
	ctx := t.Context()
	parent := map[string]string{"session_id": "sessions", "grant_id": "grants"}[column]
	if db.Driver() != DriverPostgres {
		var root int64
		if err := db.sql.QueryRowContext(ctx, `SELECT rootpage FROM sqlite_master WHERE name = ?`, name).Scan(&root); err != nil {
			t.Fatal(err)
		}
		rows, err := db.sql.QueryContext(ctx, `EXPLAIN DELETE FROM `+parent+` WHERE id = ?`, "x")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = rows.Close() }()
		found := false
		for rows.Next() {
			var (
				addr, p1, p2, p3 int64
				opcode, comment  sql.NullString
				p4               any
				p5               any
			)
			if err := rows.Scan(&addr, &opcode, &p1, &p2, &p3, &p4, &p5, &comment); err != nil {
				t.Fatal(err)
			}
			found = found || opcode.String == "OpenRead" && p2 == root
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return found
	}
	conn, err := db.sql.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	for _, q := range []string{
		`SET plan_cache_mode = force_generic_plan`,
		`SET enable_seqscan = off`,
		`PREPARE fkcheck (text) AS SELECT 1 FROM ONLY events x WHERE $1 OPERATOR(pg_catalog.=) ` + column + ` FOR KEY SHARE OF x`,
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	defer func() {
		_, _ = conn.ExecContext(ctx, `DEALLOCATE fkcheck; RESET plan_cache_mode; RESET enable_seqscan`)
	}()
	rows, err := conn.QueryContext(ctx, `EXPLAIN EXECUTE fkcheck('x')`)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	var plan strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan.String(), name) {
		t.Logf("Postgres plans the foreign key check on %s as:\n%s", column, plan.String())
		return false
	}
	return true
}
