package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

const policyColumns = `revision, policy, digest, created_at, created_by, approval_id, diff`

func getPolicy(ctx context.Context, q querier, where string, args ...any) (store.PolicyRevision, error) {
	var (
		p          store.PolicyRevision
		at         int64
		approvalID sql.NullString
		diff       string
	)
	err := q.queryRow(ctx, `SELECT `+policyColumns+` FROM policy_revisions `+where, args...).
		Scan(&p.Revision, &p.Policy, &p.Digest, &at, &p.CreatedBy, &approvalID, &diff)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return store.PolicyRevision{}, store.ErrNotFound
	case err != nil:
		return store.PolicyRevision{}, err
	}
	p.CreatedAt = fromMillis(at)
	p.ApprovalID = approval.ID(approvalID.String)
	if err := json.Unmarshal([]byte(diff), &p.Diff); err != nil {
		return store.PolicyRevision{}, fmt.Errorf("policy revision %d: decode diff: %w", p.Revision, err)
	}
	return store.NormalizePolicyRevision(p), nil
}

// lockedRevision takes the policy lock, held until t ends, and returns the
// newest revision number (0 when there is none).
func (t *tx) lockedRevision(ctx context.Context) (int64, error) {
	if err := t.lock(ctx, lockPolicy); err != nil {
		return 0, err
	}
	var n int64
	err := t.queryRow(ctx, newestRevision).Scan(&n)
	return n, err
}

// sharedRevision takes the policy lock shared, held until t ends, and
// returns the newest revision number (0 when there is none): the read of
// store.TxReads.PolicyRevision. Shared holders do not wait for each
// other; a revision's writer (lockedRevision) waits for them, and they
// for it. The read is a statement of its own, after the lock: on
// Postgres its snapshot then includes a revision whose writer held the
// lock. MAX over the primary key reads one index entry.
func (t *tx) sharedRevision(ctx context.Context) (int64, error) {
	if err := t.d.lockShared(ctx, t, lockPolicy); err != nil {
		return 0, fmt.Errorf("lock %s shared: %w", lockPolicy, err)
	}
	var n int64
	err := t.queryRow(ctx, newestRevision).Scan(&n)
	return n, err
}

// newestRevision selects the newest policy revision number, 0 when there
// is none.
const newestRevision = `SELECT COALESCE(MAX(revision), 0) FROM policy_revisions`

// CurrentPolicy returns the newest policy revision or store.ErrNotFound.
func (db *DB) CurrentPolicy(ctx context.Context) (store.PolicyRevision, error) {
	p, err := getPolicy(ctx, db, `ORDER BY revision DESC LIMIT 1`)
	if err != nil {
		return store.PolicyRevision{}, db.wrap("current policy", err)
	}
	return p, nil
}

// GetPolicy returns policy revision n or store.ErrNotFound.
func (db *DB) GetPolicy(ctx context.Context, n int64) (store.PolicyRevision, error) {
	p, err := getPolicy(ctx, db, `WHERE revision = ?`, n)
	if err != nil {
		return store.PolicyRevision{}, db.wrap(fmt.Sprintf("policy revision %d", n), err)
	}
	return p, nil
}

// insertPolicy stores rev as revision n with its policy_changed event (by
// actor at at). The caller holds the policy lock.
func (t *tx) insertPolicy(ctx context.Context, n int64, rev store.PolicyRevision, actor string, at time.Time) (store.PolicyRevision, error) {
	rev.Revision = n
	rev.CreatedAt = store.Millis(rev.CreatedAt)
	diff, err := jsonText(rev.Diff)
	if err != nil {
		return store.PolicyRevision{}, err
	}
	if _, err := t.exec(ctx, `INSERT INTO policy_revisions (`+policyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		n, rev.Policy, rev.Digest, millis(rev.CreatedAt), rev.CreatedBy, nullString(string(rev.ApprovalID)), diff); err != nil {
		return store.PolicyRevision{}, fmt.Errorf("insert policy revision %d: %w", n, err)
	}
	ev := event{Event: approval.Event{Type: store.EventPolicyChanged, Actor: actor, At: store.Millis(at)}, PolicyRevision: n}
	if err := t.writeEvents(ctx, []event{ev}); err != nil {
		return store.PolicyRevision{}, err
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
// revision, with its policy_changed event, in one transaction holding the
// policy lock. See store.PolicyStore.
func (db *DB) AppendPolicy(ctx context.Context, base int64, rev store.PolicyRevision, actor string) (store.PolicyRevision, error) {
	if err := checkRevision(rev); err != nil {
		return store.PolicyRevision{}, fmt.Errorf("append policy: %w", err)
	}
	var out store.PolicyRevision
	err := db.inTx(ctx, func(t *tx) error {
		cur, err := t.lockedRevision(ctx)
		if err != nil {
			return err
		}
		if cur != base {
			return fmt.Errorf("base revision %d is not the current revision %d: %w", base, cur, store.ErrConflict)
		}
		out, err = t.insertPolicy(ctx, base+1, rev, actor, rev.CreatedAt)
		return err
	})
	if err != nil {
		return store.PolicyRevision{}, db.wrap("append policy", err)
	}
	return out, nil
}

// ApplyPolicyApproval applies an approved policy_change approval once, in
// one transaction that holds the approval's row and the policy lock. See
// store.PolicyStore.
func (db *DB) ApplyPolicyApproval(ctx context.Context, id approval.ID, rev store.PolicyRevision, actor string, now time.Time) (store.PolicyRevision, approval.Request, error) {
	if err := checkRevision(rev); err != nil {
		return store.PolicyRevision{}, approval.Request{}, fmt.Errorf("apply policy approval %s: %w", id, err)
	}
	var (
		out    store.PolicyRevision
		req    approval.Request
		decErr error
	)
	err := db.inTx(ctx, func(t *tx) error {
		out, req, decErr = store.PolicyRevision{}, approval.Request{}, nil
		old, err := t.lockedRequest(ctx, id)
		if err != nil {
			return err
		}
		cur, err := old.decode()
		if err != nil {
			return err
		}
		current, err := t.lockedRevision(ctx)
		if err != nil {
			return err
		}
		before := cur.State
		decErr = store.DecidePolicyApproval(&cur, current, rev.Digest, now)
		if cur.State == before {
			req, err = old.decode()
			if err != nil {
				return err
			}
			return decErr // nothing changed: roll back
		}
		if req, err = t.storeRequest(ctx, old, cur, actor, now); err != nil {
			return err
		}
		if decErr != nil {
			return nil // the invalidation is committed; decErr is returned below
		}
		rev.ApprovalID = id
		out, err = t.insertPolicy(ctx, current+1, rev, actor, now)
		return err
	})
	switch {
	case err != nil && errors.Is(err, decErr):
		return store.PolicyRevision{}, req, decErr
	case err != nil:
		return store.PolicyRevision{}, req, db.wrap("apply policy approval "+string(id), err)
	case decErr != nil:
		return store.PolicyRevision{}, req, decErr
	}
	return out, req, nil
}
