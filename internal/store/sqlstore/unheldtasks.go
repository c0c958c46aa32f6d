package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// unheldApprovedTasksQuery reads the approved tasks nobody holds
// (UnheldApprovedTasks) with their task rows, in one statement: the join
// replaces a GetTask per approved request (branch tasks48), and the
// conditions leave out what the sweep cannot act on (held calls that are
// no task, direct tasks, tasks whose arguments were dropped, requests a
// live instance holds, approvals past their validity), so none of them
// fills a page ahead of a task that can run. Approved requests are few
// (the live ones: requests_state_expires on both databases, (state, id)
// on SQLite), and each joins its task by approval_tasks' primary key.
//
// requestSelect names the requests columns unqualified, so the task's
// columns come through a derived table under names of their own (both
// planners flatten it into a plain join).
const unheldApprovedTasksQuery = `SELECT ` + requestSelect + `,
		t.task_principal, t.task_arguments, t.task_created_at, t.task_expires_at
	FROM requests JOIN (SELECT request_id AS task_id, principal AS task_principal, arguments AS task_arguments,
			created_at AS task_created_at, expires_at AS task_expires_at
		FROM approval_tasks WHERE state IS NULL AND arguments IS NOT NULL) t ON t.task_id = requests.id
	WHERE requests.state = 'approved' AND requests.consumed_at IS NULL AND requests.id > ?
	AND (requests.valid_for_ms = 0 OR requests.decided_at + requests.valid_for_ms > ?)
	AND (requests.held_by = '' OR COALESCE(` + effectiveLease + `, 0) <= ?)
	ORDER BY requests.id LIMIT ?`

// UnheldApprovedTasks returns the approved tasks nobody holds as of now,
// with their task rows, ids after after in id order, at most limit (0
// means 100): see store.LedgerStore.UnheldApprovedTasks.
func (db *DB) UnheldApprovedTasks(ctx context.Context, now time.Time, after approval.ID, limit int) ([]store.ApprovedTask, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	ms := now.UnixMilli()
	rows, err := db.query(ctx, unheldApprovedTasksQuery, string(after), ms, ms, limit)
	out, err := collect(rows, err, scanApprovedTask)
	if err != nil {
		return nil, db.wrap("list approved tasks nobody holds", err)
	}
	return out, nil
}

// scanApprovedTask reads one row of unheldApprovedTasksQuery.
func scanApprovedTask(rows *sql.Rows) (store.ApprovedTask, error) {
	var (
		w                    requestRow
		principal            string
		args                 []byte
		createdAt, expiresAt int64
	)
	if err := rows.Scan(w.destWith(&principal, &args, &createdAt, &expiresAt)...); err != nil {
		return store.ApprovedTask{}, err
	}
	r, err := w.decode()
	if err != nil {
		return store.ApprovedTask{}, err
	}
	t := store.Task{RequestID: r.ID, Arguments: args, CreatedAt: fromMillis(createdAt), ExpiresAt: fromMillis(expiresAt)}
	if err := json.Unmarshal([]byte(principal), &t.Principal); err != nil {
		return store.ApprovedTask{}, fmt.Errorf("task %s: decode principal: %w", r.ID, err)
	}
	return store.ApprovedTask{Request: r, Task: t}, nil
}
