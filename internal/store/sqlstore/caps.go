package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
)

// capLocks returns the lock each cap takes, in the one order every creator
// takes them (by space, then key), so creators never deadlock.
func capLocks(caps []store.Cap) ([]lockTarget, error) {
	out := make([]lockTarget, 0, len(caps))
	for _, c := range caps {
		var l lockTarget
		switch c.Scope {
		case store.CapPrincipal:
			l = lockTarget{lockPendingPrincipal, c.Key}
		case store.CapSessionTree:
			l = lockTarget{lockPendingTree, c.Key}
		case store.CapTotal:
			l = lockTarget{lockPendingTotal, ""}
		case store.CapPolicyRequests:
			l = lockTarget{lockPolicyRequests, c.Key}
		default:
			return nil, fmt.Errorf("unknown cap scope %v", c.Scope)
		}
		if c.Limit <= 0 {
			return nil, fmt.Errorf("cap %s: limit %d, want at least 1", c.Name, c.Limit)
		}
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b lockTarget) int {
		return cmp.Or(cmp.Compare(a.space, b.space), cmp.Compare(a.key, b.key))
	})
	return slices.Compact(out), nil
}

// A lockTarget is one lock of tx.lockKey.
type lockTarget struct {
	space lockSpace
	key   string
}

// pendingTotal reads the number of pending tool-call requests from the
// counts the triggers of migration 0007 keep.
const pendingTotal = `SELECT COALESCE(SUM(created) - SUM(settled), 0) FROM pending_counts`

// pendingToolCalls is the condition selecting pending agent requests (tool
// calls, resource reads, prompt gets: what the pending caps count).
const pendingToolCalls = `state = 'pending' AND kind IN ('', 'tool_call', 'resource_read', 'prompt_get')`

// countCap counts, inside t, the requests cap c counts as of now (unix ms),
// stopping at c.Limit (no need to count past it).
func (t *tx) countCap(ctx context.Context, c store.Cap, nowMS int64) (int, error) {
	const capped = `SELECT COUNT(*) FROM (SELECT 1 FROM requests WHERE `
	var (
		q    string
		args []any
	)
	switch c.Scope {
	case store.CapPrincipal:
		q, args = capped+pendingToolCalls+` AND requested_by = ?`, []any{c.Key}
	case store.CapSessionTree:
		q, args = treeDescendants+` `+capped+pendingToolCalls+`
			AND requested_by IN (SELECT s.principal FROM sessions s JOIN down ON s.id = down.id)`, []any{c.Key}
	case store.CapTotal:
		// Counted by triggers (migration 0007): no row scan.
		var n int
		err := t.queryRow(ctx, pendingTotal).Scan(&n)
		return n, err
	case store.CapPolicyRequests:
		q, args = capped+`state = 'pending' AND kind = ? AND target = ? AND expires_at > ?`,
			[]any{approval.KindSessionPolicy, c.Key, nowMS}
	}
	var n int
	err := t.queryRow(ctx, q+` LIMIT ?) AS capped`, append(args, c.Limit)...).Scan(&n)
	return n, err
}

// treeDescendants is a WITH clause naming down(id): a session (the first
// argument) and every session below it.
const treeDescendants = `WITH RECURSIVE down(id) AS (
		SELECT id FROM sessions WHERE id = ?
		UNION ALL
		SELECT s.id FROM sessions s JOIN down ON s.parent_id = down.id
	)`

// checkCreate takes, inside t, the locks of r's caps and of r's session
// tree, then checks what CreateRequest promises before it inserts r: the
// requesting session is not revoked, a session_policy request's target is
// still at its base revision, and no cap is reached.
func (t *tx) checkCreate(ctx context.Context, r approval.Request, caps []store.Cap) error {
	locks, err := capLocks(caps)
	if err != nil {
		return err
	}
	// A session's request: serialize with RevokeSession of its tree, then
	// check the chain read after the lock.
	sid, err := t.sessionOfPrincipal(ctx, r.RequestedBy)
	if err != nil {
		return err
	}
	var chain session.Chain
	if sid != "" {
		if chain, err = readChain(ctx, t, sid); err != nil {
			return err
		}
		locks = append(locks, lockTarget{lockPendingTree, string(chain[len(chain)-1].ID)})
		slices.SortFunc(locks, func(a, b lockTarget) int {
			return cmp.Or(cmp.Compare(a.space, b.space), cmp.Compare(a.key, b.key))
		})
		locks = slices.Compact(locks)
	}
	for _, l := range locks {
		if err := t.lockKey(ctx, l.space, l.key); err != nil {
			return err
		}
	}
	if sid != "" {
		if chain, err = readChain(ctx, t, sid); err != nil {
			return err
		}
		if chain.Revoked() {
			return session.ErrRevoked
		}
	}
	if r.Kind == approval.KindSessionPolicy {
		if err := t.checkBaseRevision(ctx, r); err != nil {
			return err
		}
	}
	now := r.CreatedAt.UnixMilli()
	for _, c := range caps {
		n, err := t.countCap(ctx, c, now)
		if err != nil {
			return fmt.Errorf("count %s: %w", c.Name, err)
		}
		if n >= c.Limit {
			return &store.CapError{Cap: c, Pending: n}
		}
	}
	return nil
}

// sessionOfPrincipal returns the id of the session whose principal is p,
// or "" when p is not a session's.
func (t *tx) sessionOfPrincipal(ctx context.Context, p string) (session.ID, error) {
	var id string
	err := t.queryRow(ctx, `SELECT id FROM sessions WHERE principal = ?`, p).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return session.ID(id), err
}

// checkBaseRevision holds the target session's row until t ends (Postgres:
// FOR SHARE, so UpdateSession waits for t and its void of stale requests
// then sees r) and checks that its revision is r.BaseRevision.
func (t *tx) checkBaseRevision(ctx context.Context, r approval.Request) error {
	lock := ""
	if t.forUpdate() != "" {
		lock = " FOR SHARE"
	}
	var rev int64
	err := t.queryRow(ctx, `SELECT revision FROM sessions WHERE id = ?`+lock, r.Target).Scan(&rev)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("target session %s: %w", r.Target, store.ErrNotFound)
	case err != nil:
		return err
	case rev != r.BaseRevision:
		return fmt.Errorf("%w: session %s is at revision %d, the request was made against %d", store.ErrConflict, r.Target, rev, r.BaseRevision)
	}
	return nil
}
