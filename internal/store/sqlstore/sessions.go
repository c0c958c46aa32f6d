package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
)

func getSessionWhere(ctx context.Context, q querier, where string, arg any) (sessionRow, error) {
	var w sessionRow
	err := q.queryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE `+where, arg).Scan(w.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return sessionRow{}, store.ErrNotFound
	}
	return w, err
}

func scanSessionRow(rows *sql.Rows) (sessionRow, error) {
	var w sessionRow
	return w, rows.Scan(w.dest()...)
}

func scanSession(rows *sql.Rows) (session.Session, error) {
	w, err := scanSessionRow(rows)
	if err != nil {
		return session.Session{}, err
	}
	return w.decode()
}

// sessionColumnsS is sessionColumns qualified with the alias s.
const sessionColumnsS = `s.id, s.parent_id, s.principal, s.on_behalf_of, s.tenant, s.token_hash, s.mode, s.tools,
	s.require_approval, s.revision, s.created_at, s.created_by, s.revoked_at`

// chainQuery selects a session and its ancestors, nearest first.
const chainQuery = `WITH RECURSIVE up(id, depth) AS (
		SELECT id, 0 FROM sessions WHERE id = ?
		UNION ALL
		SELECT s.parent_id, up.depth + 1 FROM sessions s JOIN up ON s.id = up.id WHERE s.parent_id IS NOT NULL
	) SELECT ` + sessionColumnsS + ` FROM sessions s JOIN up ON s.id = up.id ORDER BY up.depth`

func readChain(ctx context.Context, q querier, id session.ID) (session.Chain, error) {
	rows, err := q.query(ctx, chainQuery, string(id))
	c, err := collect(rows, err, scanSession)
	if err == nil && len(c) == 0 {
		return nil, store.ErrNotFound
	}
	return c, err
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
	w, err := encodeSession(s)
	if err != nil {
		return fmt.Errorf("create session %s: %w", s.ID, err)
	}
	typ := approval.EventSessionCreated
	err = db.inTx(ctx, func(t *tx) error {
		if s.ParentID != "" {
			// Serialize with revocations, so a child is never created
			// under a subtree being revoked without being revoked too.
			if err := t.lock(ctx, lockSessions); err != nil {
				return err
			}
			typ = approval.EventChildCreated
			c, err := readChain(ctx, t, s.ParentID)
			if err != nil {
				return err
			}
			if c.Revoked() {
				return session.ErrRevoked
			}
		}
		res, err := t.exec(ctx, `INSERT INTO sessions (`+sessionColumns+`) VALUES (`+placeholders(numSessionColumns)+`)
			ON CONFLICT DO NOTHING`, w.args()...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return store.ErrAlreadyExists
		}
		return t.writeEvents(ctx, eventRows(store.SessionEvent(s, typ, actor, s.CreatedAt)))
	})
	if err != nil {
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
	w, err := getSessionWhere(ctx, db, where, arg)
	if err != nil {
		return session.Session{}, db.wrap(op, err)
	}
	s, err := w.decode()
	if err != nil {
		return session.Session{}, fmt.Errorf("%s: %w", op, err)
	}
	return s, nil
}

// Chain returns the session with id and its ancestors, nearest first, read
// by one query; an error wrapping store.ErrNotFound for an unknown id.
func (db *DB) Chain(ctx context.Context, id session.ID) (session.Chain, error) {
	c, err := readChain(ctx, db, id)
	if err != nil {
		return nil, db.wrap("session chain "+string(id), err)
	}
	return c, nil
}

// UpdateSession runs fn on the stored session in one transaction that holds
// its row and stores a changed policy with the next revision and a
// session_policy_changed event. See store.SessionStore.
func (db *DB) UpdateSession(ctx context.Context, id session.ID, actor string, now time.Time, fn func(*session.Session) error) (session.Session, bool, error) {
	return db.updateSession(ctx, id, actor, now, false, func(s *session.Session, _ session.Chain) error { return fn(s) })
}

// UpdateSessionWithChain is UpdateSession that also passes fn the
// session's ancestors, read and held inside the transaction: see
// store.SessionStore.UpdateSessionWithChain.
func (db *DB) UpdateSessionWithChain(ctx context.Context, id session.ID, actor string, now time.Time, fn func(*session.Session, session.Chain) error) (session.Session, bool, error) {
	return db.updateSession(ctx, id, actor, now, true, fn)
}

// updateSession is UpdateSession (UpdateSessionWithChain with withChain).
func (db *DB) updateSession(ctx context.Context, id session.ID, actor string, now time.Time, withChain bool, fn func(*session.Session, session.Chain) error) (session.Session, bool, error) {
	var (
		out     session.Session
		changed bool
		fnErr   error
	)
	err := db.inTx(ctx, func(t *tx) error {
		fnErr, changed = nil, false
		if withChain {
			// The sessions lock first, as RevokeSession takes it before the
			// rows it updates (top down): holding the session's row and then
			// waiting for its parent's would otherwise deadlock with it.
			if err := t.lock(ctx, lockSessions); err != nil {
				return err
			}
		}
		old, err := getSessionWhere(ctx, t, `id = ?`+t.forUpdate(), string(id))
		if err != nil {
			return err
		}
		cur, err := old.decode()
		if err != nil {
			return err
		}
		if cur.Revoked() {
			return session.ErrRevoked
		}
		var ancestors session.Chain
		if withChain && cur.ParentID != "" {
			if ancestors, err = t.heldChain(ctx, cur.ParentID); err != nil {
				return err
			}
		}
		next := cur
		next.Tools = append([]string(nil), cur.Tools...)
		if cur.Tools != nil && next.Tools == nil {
			next.Tools = []string{}
		}
		next.RequireApproval = cloneRequirements(cur.RequireApproval)
		if err := fn(&next, ancestors); err != nil {
			fnErr = err
			return err
		}
		next = store.NormalizeSession(next)
		if !store.SamePolicyOnly(cur, next) {
			return fmt.Errorf("update changed more than the session's policy")
		}
		w, err := encodeSession(next)
		if err != nil {
			return err
		}
		if w.Mode == old.Mode && w.Tools == old.Tools && w.RequireApproval == old.RequireApproval {
			out = cur
			return nil
		}
		w.Revision = old.Revision + 1
		if _, err := t.exec(ctx, `UPDATE sessions SET mode = ?, tools = ?, require_approval = ?, revision = ?
			WHERE id = ? AND revision = ?`, w.Mode, w.Tools, w.RequireApproval, w.Revision, w.ID, old.Revision); err != nil {
			return err
		}
		if out, err = w.decode(); err != nil {
			return err
		}
		changed = true
		return t.writeEvents(ctx, eventRows(store.SessionEvent(out, approval.EventSessionPolicyChanged, actor, now)))
	})
	switch {
	case fnErr != nil:
		return session.Session{}, false, fnErr
	case err != nil:
		return session.Session{}, false, db.wrap("update session "+string(id), err)
	}
	return out, changed, nil
}

// heldChain reads the chain of session id with every session in it held
// until t ends (on SQLite the one writer holds everything). A parent's
// row is never changed but for its policy and its revocation, so the
// sessions of the chain are known before they are held; read again once
// held, their policy is the one committed last (READ COMMITTED takes a
// new snapshot per statement).
func (t *tx) heldChain(ctx context.Context, id session.ID) (session.Chain, error) {
	c, err := readChain(ctx, t, id)
	if err != nil || t.forUpdate() == "" {
		return c, err
	}
	for _, s := range c {
		if _, err := getSessionWhere(ctx, t, `id = ?`+t.forUpdate(), string(s.ID)); err != nil {
			return nil, err
		}
	}
	return readChain(ctx, t, id)
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

// RevokeSession revokes the session with id and its live descendants,
// cancels their pending approval requests and invalidates their approved
// ones, in one transaction (on Postgres holding the sessions lock, so no
// child is created in the subtree meanwhile, and the tree's lock, so no
// request is created in it meanwhile). See store.SessionStore.
func (db *DB) RevokeSession(ctx context.Context, id session.ID, actor string, now time.Time) (store.Revocation, error) {
	var out store.Revocation
	err := db.inTx(ctx, func(t *tx) error {
		out = store.Revocation{}
		if err := t.lock(ctx, lockSessions); err != nil {
			return err
		}
		c, err := readChain(ctx, t, id)
		if err != nil {
			return err
		}
		if err := t.lockKey(ctx, lockPendingTree, string(c[len(c)-1].ID)); err != nil {
			return err
		}
		rows, err := t.query(ctx, descendantsQuery, string(id))
		live, err := collect(rows, err, scanSessionRow)
		if err != nil {
			return err
		}
		// Requests first: their rows are locked before the event log is, as
		// UpdateRequest does, so the two never deadlock.
		principals := make([]string, len(live))
		for i, w := range live {
			principals[i] = w.Principal
		}
		if out.Cancelled, out.Invalidated, err = t.voidOpenOf(ctx, principals, actor, now); err != nil {
			return err
		}
		at := millis(now)
		var evs []approval.Event
		for _, w := range live {
			if _, err := t.exec(ctx, `UPDATE sessions SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, at, w.ID); err != nil {
				return err
			}
			w.RevokedAt = sql.NullInt64{Int64: at, Valid: true}
			s, err := w.decode()
			if err != nil {
				return err
			}
			out.Sessions = append(out.Sessions, s)
			evs = append(evs, store.SessionEvent(s, approval.EventSessionRevoked, actor, now))
		}
		return t.writeEvents(ctx, eventRows(evs...))
	})
	if err != nil {
		return store.Revocation{}, db.wrap("revoke session "+string(id), err)
	}
	return out, nil
}

// voidOpenOf moves every pending request of principals to cancelled and
// every approved one to invalidated (reason store.ReasonSessionRevoked),
// each with its event, inside t, and returns their ids. All their rows are
// read and locked before any is written; on Postgres a row another
// transaction holds (a consume) is waited for and read again, so one
// consumed meanwhile is left alone.
func (t *tx) voidOpenOf(ctx context.Context, principals []string, actor string, now time.Time) (cancelled, invalidated []approval.ID, _ error) {
	if len(principals) == 0 {
		return nil, nil, nil
	}
	vals := make([]any, len(principals))
	for i, p := range principals {
		vals[i] = p
	}
	marks, args := inList(vals)
	rows, err := t.query(ctx, `SELECT `+requestSelect+` FROM requests WHERE requested_by IN (`+marks+`)
		AND state IN ('pending', 'approved') ORDER BY id`+t.forUpdate(), args...)
	olds, err := collect(rows, err, scanRequestRow)
	if err != nil {
		return nil, nil, err
	}
	for _, old := range olds {
		cur, err := old.decode()
		if err != nil {
			return nil, nil, err
		}
		switch cur.State {
		case approval.StatePending:
			if err := cur.Cancel(now); err != nil {
				return nil, nil, err
			}
			cancelled = append(cancelled, cur.ID)
		case approval.StateApproved:
			cur.State = approval.StateInvalidated
			invalidated = append(invalidated, cur.ID)
		default:
			continue
		}
		cur.Reason = store.ReasonSessionRevoked
		if _, err := t.storeRequest(ctx, old, cur, actor, now); err != nil {
			return nil, nil, err
		}
	}
	return cancelled, invalidated, nil
}

// CountPendingInTree counts the pending tool-call requests of the sessions
// in the tree below root, root included.
func (db *DB) CountPendingInTree(ctx context.Context, root session.ID) (int, error) {
	var n int
	err := db.queryRow(ctx, `WITH RECURSIVE down(id) AS (
			SELECT id FROM sessions WHERE id = ?
			UNION ALL
			SELECT s.id FROM sessions s JOIN down ON s.parent_id = down.id
		) SELECT COUNT(*) FROM requests
		WHERE state = 'pending' AND kind IN ('', 'tool_call', 'resource_read', 'prompt_get')
		AND requested_by IN (SELECT s.principal FROM sessions s JOIN down ON s.id = down.id)`, string(root)).Scan(&n)
	if err != nil {
		return 0, db.wrap("count pending in session tree", err)
	}
	return n, nil
}
