package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlrow"
)

const policyColumns = `revision, policy, digest, created_at, created_by, approval_id, diff`

func scanPolicy(sc interface{ Scan(...any) error }) (store.PolicyRevision, error) {
	var (
		p          store.PolicyRevision
		at         int64
		approvalID sql.NullString
		diff       string
	)
	if err := sc.Scan(&p.Revision, &p.Policy, &p.Digest, &at, &p.CreatedBy, &approvalID, &diff); err != nil {
		return store.PolicyRevision{}, err
	}
	p.CreatedAt = sqlrow.FromMillis(at)
	p.ApprovalID = approval.ID(approvalID.String)
	if err := json.Unmarshal([]byte(diff), &p.Diff); err != nil {
		return store.PolicyRevision{}, fmt.Errorf("policy revision %d: decode diff: %w", p.Revision, err)
	}
	return store.NormalizePolicyRevision(p), nil
}

func getPolicy(ctx context.Context, q querier, where string, args ...any) (store.PolicyRevision, error) {
	p, err := scanPolicy(q.QueryRowContext(ctx, `SELECT `+policyColumns+` FROM policy_revisions `+where, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return store.PolicyRevision{}, store.ErrNotFound
	}
	return p, err
}

// currentRevision returns the newest revision number, 0 when there is none.
func currentRevision(ctx context.Context, q querier) (int64, error) {
	var n int64
	err := q.QueryRowContext(ctx, `SELECT COALESCE(MAX(revision), 0) FROM policy_revisions`).Scan(&n)
	return n, err
}

// CurrentPolicy returns the newest policy revision or store.ErrNotFound.
func (db *DB) CurrentPolicy(ctx context.Context) (store.PolicyRevision, error) {
	p, err := getPolicy(ctx, db.sql, `ORDER BY revision DESC LIMIT 1`)
	if err != nil {
		return store.PolicyRevision{}, db.wrapPolicy("current policy", err)
	}
	return p, nil
}

// GetPolicy returns policy revision n or store.ErrNotFound.
func (db *DB) GetPolicy(ctx context.Context, n int64) (store.PolicyRevision, error) {
	p, err := getPolicy(ctx, db.sql, `WHERE revision = ?`, n)
	if err != nil {
		return store.PolicyRevision{}, db.wrapPolicy(fmt.Sprintf("policy revision %d", n), err)
	}
	return p, nil
}

func (db *DB) wrapPolicy(op string, err error) error {
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return db.wrap(op, err)
}

// insertPolicy stores rev as revision n with its policy_changed event.
func insertPolicy(ctx context.Context, tx *sql.Tx, n int64, rev store.PolicyRevision, actor string, at time.Time) (store.PolicyRevision, error) {
	rev.Revision = n
	rev.CreatedAt = store.Millis(rev.CreatedAt)
	diff, err := sqlrow.JSONText(rev.Diff)
	if err != nil {
		return store.PolicyRevision{}, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO policy_revisions (`+policyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		n, rev.Policy, rev.Digest, sqlrow.Millis(rev.CreatedAt), rev.CreatedBy, nullString(string(rev.ApprovalID)), diff); err != nil {
		return store.PolicyRevision{}, fmt.Errorf("insert policy revision %d: %w", n, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO events (policy_revision, type, state, actor, at) VALUES (?, ?, '', ?, ?)`,
		n, string(store.EventPolicyChanged), actor, store.Millis(at).UnixMilli()); err != nil {
		return store.PolicyRevision{}, fmt.Errorf("insert %s event: %w", store.EventPolicyChanged, err)
	}
	return store.NormalizePolicyRevision(rev), nil
}

func checkRevision(rev store.PolicyRevision) error {
	if rev.Policy == "" || rev.Digest == "" || rev.CreatedAt.IsZero() {
		return errors.New("policy, digest and created_at are required")
	}
	return nil
}

// AppendPolicy stores rev as revision base+1 if base is still the current
// revision, with its policy_changed event, in one IMMEDIATE transaction.
// See store.PolicyStore.
func (db *DB) AppendPolicy(ctx context.Context, base int64, rev store.PolicyRevision, actor string) (store.PolicyRevision, error) {
	if err := checkRevision(rev); err != nil {
		return store.PolicyRevision{}, fmt.Errorf("append policy: %w", err)
	}
	var out store.PolicyRevision
	err := db.inTx(ctx, func(tx *sql.Tx) error {
		cur, err := currentRevision(ctx, tx)
		if err != nil {
			return err
		}
		if cur != base {
			return fmt.Errorf("base revision %d is not the current revision %d: %w", base, cur, store.ErrConflict)
		}
		out, err = insertPolicy(ctx, tx, base+1, rev, actor, rev.CreatedAt)
		return err
	})
	if err != nil {
		return store.PolicyRevision{}, db.wrapPolicy("append policy", err)
	}
	return out, nil
}

// ApplyPolicyApproval applies an approved policy_change approval once, in
// one IMMEDIATE transaction. See store.PolicyStore.
func (db *DB) ApplyPolicyApproval(ctx context.Context, id approval.ID, rev store.PolicyRevision, actor string, now time.Time) (store.PolicyRevision, approval.Request, error) {
	if err := checkRevision(rev); err != nil {
		return store.PolicyRevision{}, approval.Request{}, fmt.Errorf("apply policy approval %s: %w", id, err)
	}
	var (
		out    store.PolicyRevision
		req    approval.Request
		decErr error
	)
	err := db.inTx(ctx, func(tx *sql.Tx) error {
		out, req, decErr = store.PolicyRevision{}, approval.Request{}, nil
		old, err := getRow(ctx, tx, id)
		if err != nil {
			return err
		}
		before, err := old.Decode()
		if err != nil {
			return err
		}
		cur, err := old.Decode()
		if err != nil {
			return err
		}
		current, err := currentRevision(ctx, tx)
		if err != nil {
			return err
		}
		decErr = store.DecidePolicyApproval(&cur, current, rev.Digest, now)
		if cur.State == before.State {
			req = store.Normalize(before)
			return decErr // nothing changed: roll back
		}
		w, err := toRow(cur)
		if err != nil {
			return err
		}
		if req, err = w.Decode(); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE requests SET (`+columns+`) = (`+placeholders(numColumns)+`)
			WHERE id = ? AND state = ?`, append(w.Args(), old.ID(), old.State())...); err != nil {
			return err
		}
		if err := insertEvents(ctx, tx, store.ChangeEvents(before, req, actor, now)); err != nil {
			return err
		}
		if decErr != nil {
			return nil // the invalidation is committed; decErr is returned below
		}
		rev.ApprovalID = id
		out, err = insertPolicy(ctx, tx, current+1, rev, actor, now)
		return err
	})
	switch {
	case err != nil && errors.Is(err, decErr):
		return store.PolicyRevision{}, req, decErr
	case err != nil:
		return store.PolicyRevision{}, req, db.wrapPolicy("apply policy approval "+string(id), err)
	case decErr != nil:
		return store.PolicyRevision{}, req, decErr
	}
	return out, req, nil
}
