package sqlstore

import (
	"database/sql"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestUpdateSetsOnlyChangedColumns: the UPDATE that stores a decision
// names only the columns the decision changed (state, reviews, decided_by,
// decided_at, reason), not the arguments or the indexed columns it left
// alone, so SQLite does not rewrite the indexes on them (BenchmarkRequestLifecycle:
// CPU per approved call −13 %, docs/performance.md "Approving them all").
func TestUpdateSetsOnlyChangedColumns(t *testing.T) {
	if len(requestColumnNames) != numRequestColumns {
		t.Fatalf("%d names in requestColumns, numRequestColumns = %d", len(requestColumnNames), numRequestColumns)
	}
	r := pendingRequest(testID(1))
	old, err := encodeRequest(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Review(approval.Reviewer{ID: "bob"}, approval.VerdictApprove, "fine", "", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	cur, err := encodeRequest(r)
	if err != nil {
		t.Fatal(err)
	}
	q, args := changedColumns(&old, &cur)
	want := `UPDATE requests SET state = ?, reviews = ?, decided_by = ?, decided_at = ?, reason = ? WHERE id = ? AND (state || '') = ?`
	if q != want {
		t.Errorf("changedColumns =\n%s\nwant\n%s", q, want)
	}
	if len(args) != 5 || args[0] != string(approval.StateApproved) || args[2] != "bob" || args[4] != "fine" {
		t.Errorf("values %v, want the approved state, the reviews, bob, the time and the reason", args)
	}
}

// TestColumnDiffsFollowArgs: changing any one column of a row makes
// changedColumns set that column alone, by its name in requestColumns,
// to the value requestRow.args gives for it (columnDiff must
// follow requestColumns' order, field by field).
func TestColumnDiffsFollowArgs(t *testing.T) {
	old, err := encodeRequest(pendingRequest(testID(1)))
	if err != nil {
		t.Fatal(err)
	}
	if q, args := changedColumns(&old, &old); len(args) != 0 || q != `UPDATE requests SET  WHERE id = ? AND (state || '') = ?` {
		t.Errorf("unchanged row: %q %v, want no column set", q, args)
	}
	for i := range numRequestColumns {
		cur := old
		switch p := cur.dest()[i].(type) {
		case *string:
			*p += "-changed"
		case *int64:
			*p += 7
		case *sql.NullString:
			*p = sql.NullString{String: p.String + "-changed", Valid: true}
		case *sql.NullInt64:
			*p = sql.NullInt64{Int64: p.Int64 + 7, Valid: true}
		default:
			t.Fatalf("column %d (%s): field type %T not handled by this test", i, requestColumnNames[i], p)
		}
		q, args := changedColumns(&old, &cur)
		want := `UPDATE requests SET ` + requestColumnNames[i] + ` = ? WHERE id = ? AND (state || '') = ?`
		if q != want || len(args) != 1 || args[0] != cur.args()[i] {
			t.Errorf("column %d changed: %q %v, want %q [%v]", i, q, args, want, cur.args()[i])
		}
	}
}
