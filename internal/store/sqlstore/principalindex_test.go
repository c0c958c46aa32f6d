package sqlstore

import (
	"strings"
	"testing"

	"toolgate/internal/store"
)

// TestOnePrincipalIndexForPendingReads: migration 21 keeps one of the two
// indexes that served the reads of one principal's pending requests, the
// one each planner reads them through: Postgres drops
// requests_requested_by_state (requested_by, state), which every row
// version of a request entered (three per approval: no update of a request
// is HOT), and reads them through requests_pending; SQLite drops
// requests_pending, which its planner never read, and reads them through
// requests_requested_by_state. Every query that reads requests by
// principal still reads them through an index on requested_by: the
// pending ones (the caps, CountPending, CountPendingInTree, the pipelined
// creation's guard), the identical ones through requests_identical, and
// the web history page (decided, newest first) through an index on
// requested_by or the primary key in id order, never the whole table.
func TestOnePrincipalIndexForPendingReads(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			dropped, pending := "requests_pending", "requests_requested_by_state"
			if db.Driver() == DriverPostgres {
				dropped, pending = pending, dropped
			}
			for ix, want := range map[string]int{dropped: 0, pending: 1} {
				var n int
				if err := db.sql.QueryRowContext(t.Context(), db.d.rebind(indexCountQuery(db)), ix).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n != want {
					t.Errorf("%d indexes named %s, want %d", n, ix, want)
				}
			}
			capped := `SELECT COUNT(*) FROM (SELECT 1 FROM requests WHERE ` + pendingToolCalls
			history, historyArgs := listQuery(requestList(store.Filter{Descending: true, Limit: 50, Decided: true, RequestedBy: "agent-1"}), store.ListPosition{}, 50, db.Driver() == DriverPostgres)
			readers := []struct {
				name string
				q    string
				args []any
				want []string // one of these indexes
			}{
				{"principal cap", capped + ` AND requested_by = ? LIMIT ?) AS capped`, []any{"agent-1", 10}, []string{pending}},
				{"session tree cap", treeDescendants + ` ` + capped + `
					AND requested_by IN (SELECT s.principal FROM sessions s JOIN down ON s.id = down.id) LIMIT ?) AS capped`,
					[]any{"s1", 10}, []string{pending}},
				{"CountPending", `SELECT COUNT(*) FROM requests WHERE ` + pendingToolCalls + ` AND requested_by = ?`, []any{"agent-1"}, []string{pending}},
				{"CountPendingInTree", treeDescendants + ` SELECT COUNT(*) FROM requests
					WHERE state = 'pending' AND kind IN ('', 'tool_call', 'resource_read', 'prompt_get')
					AND requested_by IN (SELECT s.principal FROM sessions s JOIN down ON s.id = down.id)`, []any{"s1"}, []string{pending}},
				{"OpenIdentical", `SELECT id FROM requests
					WHERE requested_by = ? AND arguments_hash = ? AND server = ? AND tool = ?
					AND (state IN ('pending', 'approved') OR (state = 'denied' AND answered_at IS NULL))
					ORDER BY id LIMIT 100`, []any{"agent-1", "h", "s", "t"}, []string{"requests_identical"}},
				{"history page", history, historyArgs, []string{"requests_identical", "requests_pkey", "sqlite_autoindex_requests_1", "PRIMARY KEY", "requests_requested_by_state", "requests_list_order"}},
			}
			if db.Driver() == DriverPostgres {
				readers = append(readers, struct {
					name string
					q    string
					args []any
					want []string
				}{"pipelined creation's guard", pgCreateGuard, []any{"agent-1", 10, 100}, []string{pending}})
			}
			for _, r := range readers {
				plan := lookupPlan(t, db, r.q, r.args...)
				t.Logf("%s: %s", r.name, plan)
				ok := false
				for _, ix := range r.want {
					ok = ok || strings.Contains(plan, ix)
				}
				if !ok || strings.Contains(plan, "SCAN requests ") || strings.Contains(plan, "Seq Scan on requests") {
					t.Errorf("%s is planned as %q, want it through one of %q", r.name, plan, r.want)
				}
			}
		})
	}
}

// indexCountQuery counts the indexes named by its one argument.
func indexCountQuery(db *DB) string {
	if db.Driver() == DriverPostgres {
		return `SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() AND indexname = ?`
	}
	return `SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = ?`
}
