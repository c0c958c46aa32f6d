package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlrow"
)

// The sessions row codec is shared with the other SQL backend (sqlrow).
type sessionRow = sqlrow.Session

const (
	sessionColumns    = sqlrow.SessionColumns
	numSessionColumns = sqlrow.NumSessionColumns
)

func nullString(s string) sql.NullString {
	return sql.NullString{String: s, Valid: s != ""}
}

func getSessionWhere(ctx context.Context, q querier, where string, arg any) (sessionRow, error) {
	var w sessionRow
	err := q.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE `+where, arg).Scan(w.Dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return sessionRow{}, store.ErrNotFound
	}
	return w, err
}

// chainQuery selects a session and its ancestors, nearest first.
const chainQuery = `WITH RECURSIVE up(id, depth) AS (
		SELECT id, 0 FROM sessions WHERE id = ?
		UNION ALL
		SELECT s.parent_id, up.depth + 1 FROM sessions s JOIN up ON s.id = up.id WHERE s.parent_id IS NOT NULL
	) SELECT ` + sessionColumnsS + ` FROM sessions s JOIN up ON s.id = up.id ORDER BY up.depth`

// sessionColumnsS is sessionColumns qualified with the alias s.
const sessionColumnsS = `s.id, s.parent_id, s.principal, s.on_behalf_of, s.tenant, s.token_hash, s.mode, s.tools,
	s.require_approval, s.revision, s.created_at, s.created_by, s.revoked_at`

func readChain(ctx context.Context, q querier, id session.ID) (session.Chain, error) {
	rows, err := q.QueryContext(ctx, chainQuery, string(id))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var c session.Chain
	for rows.Next() {
		var w sessionRow
		if err := rows.Scan(w.Dest()...); err != nil {
			return nil, err
		}
		s, err := w.Decode()
		if err != nil {
			return nil, err
		}
		c = append(c, s)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(c) == 0 {
		return nil, store.ErrNotFound
	}
	return c, nil
}

// CreateSession inserts s and writes its session_created (root) or
// child_created event in one transaction. See store.SessionStore.
func (db *DB) CreateSession(ctx context.Context, s session.Session, actor string) error {
	switch {
	case s.ID == "" || s.TokenHash == "" || s.CreatedAt.IsZero():
		return fmt.Errorf("create session %s: id, token hash and created_at are required", s.ID)
	case s.Revision != 1:
		return fmt.Errorf("create session %s: revision %d, want 1", s.ID, s.Revision)
	}
	w, err := sqlrow.EncodeSession(s)
	if err != nil {
		return fmt.Errorf("create session %s: %w", s.ID, err)
	}
	typ := approval.EventSessionCreated
	err = db.inTx(ctx, func(tx *sql.Tx) error {
		if s.ParentID != "" {
			typ = approval.EventChildCreated
			c, err := readChain(ctx, tx, s.ParentID)
			if err != nil {
				return err
			}
			if c.Revoked() {
				return session.ErrRevoked
			}
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO sessions (`+sessionColumns+`) VALUES (`+placeholders(numSessionColumns)+`)
			ON CONFLICT DO NOTHING`, w.Args()...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return store.ErrAlreadyExists
		}
		return insertEvents(ctx, tx, []approval.Event{store.SessionEvent(s, typ, actor, s.CreatedAt)})
	})
	switch {
	case errors.Is(err, store.ErrAlreadyExists), errors.Is(err, store.ErrNotFound), errors.Is(err, session.ErrRevoked):
		return fmt.Errorf("create session %s: %w", s.ID, err)
	case err != nil:
		return db.wrap("create session "+string(s.ID), err)
	}
	return nil
}

// GetSession returns the session with id, or an error wrapping
// store.ErrNotFound.
func (db *DB) GetSession(ctx context.Context, id session.ID) (session.Session, error) {
	return db.sessionWhere(ctx, "get session "+string(id), `id = ?`, string(id))
}

// SessionByToken returns the session whose token hash is tokenHash, or an
// error wrapping store.ErrNotFound.
func (db *DB) SessionByToken(ctx context.Context, tokenHash string) (session.Session, error) {
	return db.sessionWhere(ctx, "find session by token", `token_hash = ?`, tokenHash)
}

func (db *DB) sessionWhere(ctx context.Context, op, where string, arg any) (session.Session, error) {
	w, err := getSessionWhere(ctx, db.sql, where, arg)
	if errors.Is(err, store.ErrNotFound) {
		return session.Session{}, fmt.Errorf("%s: %w", op, err)
	}
	if err != nil {
		return session.Session{}, db.wrap(op, err)
	}
	s, err := w.Decode()
	if err != nil {
		return session.Session{}, fmt.Errorf("%s: %w", op, err)
	}
	return s, nil
}

// Chain returns the session with id and its ancestors, nearest first, read
// by one query; an error wrapping store.ErrNotFound for an unknown id.
func (db *DB) Chain(ctx context.Context, id session.ID) (session.Chain, error) {
	c, err := readChain(ctx, db.sql, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("session chain %s: %w", id, err)
	}
	if err != nil {
		return nil, db.wrap("session chain "+string(id), err)
	}
	return c, nil
}

// UpdateSession runs fn on the stored session in one IMMEDIATE transaction
// and stores a changed policy with the next revision and a
// session_policy_changed event. See store.SessionStore.
func (db *DB) UpdateSession(ctx context.Context, id session.ID, actor string, now time.Time, fn func(*session.Session) error) (session.Session, bool, error) {
	var (
		out     session.Session
		changed bool
		fnErr   error
	)
	err := db.inTx(ctx, func(tx *sql.Tx) error {
		fnErr, changed = nil, false
		old, err := getSessionWhere(ctx, tx, `id = ?`, string(id))
		if err != nil {
			return err
		}
		cur, err := old.Decode()
		if err != nil {
			return err
		}
		if cur.Revoked() {
			return session.ErrRevoked
		}
		next := cur
		next.Tools = append([]string(nil), cur.Tools...)
		if cur.Tools != nil && next.Tools == nil {
			next.Tools = []string{}
		}
		next.RequireApproval = cloneRequirements(cur.RequireApproval)
		if err := fn(&next); err != nil {
			fnErr = err
			return err
		}
		next = store.NormalizeSession(next)
		if !store.SamePolicyOnly(cur, next) {
			return fmt.Errorf("update changed more than the session's policy")
		}
		w, err := sqlrow.EncodeSession(next)
		if err != nil {
			return err
		}
		if w.Mode == old.Mode && w.Tools == old.Tools && w.RequireApproval == old.RequireApproval {
			out = cur
			return nil
		}
		w.Revision = old.Revision + 1
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET mode = ?, tools = ?, require_approval = ?, revision = ?
			WHERE id = ? AND revision = ?`, w.Mode, w.Tools, w.RequireApproval, w.Revision, w.ID, old.Revision); err != nil {
			return err
		}
		if out, err = w.Decode(); err != nil {
			return err
		}
		changed = true
		return insertEvents(ctx, tx, []approval.Event{store.SessionEvent(out, approval.EventSessionPolicyChanged, actor, now)})
	})
	switch {
	case fnErr != nil:
		return session.Session{}, false, fnErr
	case errors.Is(err, store.ErrNotFound), errors.Is(err, session.ErrRevoked):
		return session.Session{}, false, fmt.Errorf("update session %s: %w", id, err)
	case err != nil:
		return session.Session{}, false, db.wrap("update session "+string(id), err)
	}
	return out, changed, nil
}

func cloneRequirements(m map[string]session.Requirement) map[string]session.Requirement {
	if m == nil {
		return nil
	}
	out := make(map[string]session.Requirement, len(m))
	for k, v := range m {
		v.Tools = append([]string(nil), v.Tools...)
		out[k] = v
	}
	return out
}

// descendantsQuery selects the live sessions in the subtree of a session,
// itself included, nearest first.
const descendantsQuery = `WITH RECURSIVE down(id, depth) AS (
		SELECT id, 0 FROM sessions WHERE id = ?
		UNION ALL
		SELECT s.id, down.depth + 1 FROM sessions s JOIN down ON s.parent_id = down.id
	) SELECT ` + sessionColumnsS + ` FROM sessions s JOIN down ON s.id = down.id
	WHERE s.revoked_at IS NULL ORDER BY down.depth, s.id`

// RevokeSession revokes the session with id and its live descendants and
// cancels their pending approval requests, in one transaction. See
// store.SessionStore.
func (db *DB) RevokeSession(ctx context.Context, id session.ID, actor string, now time.Time) (store.Revocation, error) {
	var out store.Revocation
	err := db.inTx(ctx, func(tx *sql.Tx) error {
		out = store.Revocation{}
		if _, err := getSessionWhere(ctx, tx, `id = ?`, string(id)); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, descendantsQuery, string(id))
		if err != nil {
			return err
		}
		var live []sessionRow
		for rows.Next() {
			var w sessionRow
			if err := rows.Scan(w.Dest()...); err != nil {
				rows.Close()
				return err
			}
			live = append(live, w)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
		// Requests first: their rows are locked before the event log is, as
		// UpdateRequest does, so the two never deadlock.
		principals := make([]string, len(live))
		for i, w := range live {
			principals[i] = w.Principal
		}
		if out.Cancelled, err = cancelPendingOf(ctx, tx, principals, actor, now); err != nil {
			return err
		}
		at := sqlrow.Millis(now)
		var evs []approval.Event
		for _, w := range live {
			if _, err := tx.ExecContext(ctx, `UPDATE sessions SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, at, w.ID); err != nil {
				return err
			}
			w.RevokedAt = sql.NullInt64{Int64: at, Valid: true}
			s, err := w.Decode()
			if err != nil {
				return err
			}
			out.Sessions = append(out.Sessions, s)
			evs = append(evs, store.SessionEvent(s, approval.EventSessionRevoked, actor, now))
		}
		if err := insertEvents(ctx, tx, evs); err != nil {
			return err
		}
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return store.Revocation{}, fmt.Errorf("revoke session %s: %w", id, err)
	}
	if err != nil {
		return store.Revocation{}, db.wrap("revoke session "+string(id), err)
	}
	return out, nil
}

// cancelPendingOf moves every pending request of principals to cancelled
// with its event, inside tx, and returns their ids. All their rows are read
// (and in Postgres locked) before any event is written.
func cancelPendingOf(ctx context.Context, tx *sql.Tx, principals []string, actor string, now time.Time) ([]approval.ID, error) {
	if len(principals) == 0 {
		return nil, nil
	}
	args := make([]any, len(principals))
	for i, p := range principals {
		args[i] = p
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+columns+` FROM requests WHERE requested_by IN (`+placeholders(len(args))+`)
		AND state = 'pending' ORDER BY id`, args...)
	if err != nil {
		return nil, err
	}
	var olds []row
	for rows.Next() {
		var w row
		if err := rows.Scan(w.Dest()...); err != nil {
			rows.Close()
			return nil, err
		}
		olds = append(olds, w)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var ids []approval.ID
	for _, old := range olds {
		before, err := old.Decode()
		if err != nil {
			return nil, err
		}
		cur, err := old.Decode()
		if err != nil {
			return nil, err
		}
		if err := cur.Cancel(now); err != nil {
			return nil, err
		}
		cur.Reason = store.ReasonSessionRevoked
		w, err := toRow(cur)
		if err != nil {
			return nil, err
		}
		after, err := w.Decode()
		if err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE requests SET (`+columns+`) = (`+placeholders(numColumns)+`)
			WHERE id = ? AND state = ?`, append(w.Args(), old.ID(), old.State())...); err != nil {
			return nil, err
		}
		if err := insertEvents(ctx, tx, store.ChangeEvents(before, after, actor, now)); err != nil {
			return nil, err
		}
		ids = append(ids, cur.ID)
	}
	return ids, nil
}

// CountPendingInTree counts the pending tool-call requests of the sessions
// in the tree below root, root included.
func (db *DB) CountPendingInTree(ctx context.Context, root session.ID) (int, error) {
	var n int
	err := db.sql.QueryRowContext(ctx, `WITH RECURSIVE down(id) AS (
			SELECT id FROM sessions WHERE id = ?
			UNION ALL
			SELECT s.id FROM sessions s JOIN down ON s.parent_id = down.id
		) SELECT COUNT(*) FROM requests
		WHERE state = 'pending' AND kind IN ('', 'tool_call')
		AND requested_by IN (SELECT s.principal FROM sessions s JOIN down ON s.id = down.id)`, string(root)).Scan(&n)
	if err != nil {
		return 0, db.wrap("count pending in session tree", err)
	}
	return n, nil
}
