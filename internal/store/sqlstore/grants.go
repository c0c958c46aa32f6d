package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/grant"
	"toolgate/internal/store"
)

// grantColumns lists the grants columns in the order of grantRow.args and
// grantRow.dest.
const grantColumns = `id, principal, on_behalf_of, tenant, server, tool, predicate, created_at, expires_at,
	max_uses, uses, created_by, approved_by, approvals, reason, source_approval, rule, revoked_at, revoked_by, revoke_reason`

const numGrantColumns = 20

// grantRow is one grants row as stored; approved_by is JSON text.
type grantRow struct {
	id, principal, onBehalfOf, tenant, server, tool, predicate string
	createdAt, expiresAt                                       int64
	maxUses, uses                                              int64
	createdBy, approvedBy                                      string
	approvals                                                  int64
	reason, sourceApproval, rule                               string
	revokedAt                                                  sql.NullInt64
	revokedBy, revokeReason                                    string
}

func (w *grantRow) args() []any {
	return []any{w.id, w.principal, w.onBehalfOf, w.tenant, w.server, w.tool, w.predicate, w.createdAt, w.expiresAt,
		w.maxUses, w.uses, w.createdBy, w.approvedBy, w.approvals, w.reason, w.sourceApproval, w.rule, w.revokedAt, w.revokedBy, w.revokeReason}
}

func (w *grantRow) dest() []any {
	return []any{&w.id, &w.principal, &w.onBehalfOf, &w.tenant, &w.server, &w.tool, &w.predicate, &w.createdAt, &w.expiresAt,
		&w.maxUses, &w.uses, &w.createdBy, &w.approvedBy, &w.approvals, &w.reason, &w.sourceApproval, &w.rule, &w.revokedAt, &w.revokedBy, &w.revokeReason}
}

func encodeGrant(g grant.Grant) (grantRow, error) {
	g = store.NormalizeGrant(g)
	by, err := jsonText(g.ApprovedBy)
	if err != nil {
		return grantRow{}, fmt.Errorf("encode approved_by: %w", err)
	}
	return grantRow{
		id: g.ID, principal: g.Principal, onBehalfOf: g.OnBehalfOf, tenant: g.Tenant, server: g.Server, tool: g.Tool,
		predicate: g.When, createdAt: millis(g.CreatedAt), expiresAt: millis(g.ExpiresAt),
		maxUses: g.MaxUses, uses: g.Uses, createdBy: g.CreatedBy, approvedBy: by, approvals: int64(g.Approvals),
		reason: g.Reason, sourceApproval: string(g.SourceApproval), rule: g.Rule,
		revokedAt: nullMillis(g.RevokedAt), revokedBy: g.RevokedBy, revokeReason: g.RevokeReason,
	}, nil
}

func (w *grantRow) decode() (grant.Grant, error) {
	g := grant.Grant{
		ID: w.id, Principal: w.principal, OnBehalfOf: w.onBehalfOf, Tenant: w.tenant, Server: w.server, Tool: w.tool,
		When: w.predicate, CreatedAt: fromMillis(w.createdAt), ExpiresAt: fromMillis(w.expiresAt),
		MaxUses: w.maxUses, Uses: w.uses, CreatedBy: w.createdBy, Approvals: int(w.approvals),
		Reason: w.reason, SourceApproval: approval.ID(w.sourceApproval), Rule: w.rule,
		RevokedAt: fromNullMillis(w.revokedAt), RevokedBy: w.revokedBy, RevokeReason: w.revokeReason,
	}
	if err := json.Unmarshal([]byte(w.approvedBy), &g.ApprovedBy); err != nil {
		return grant.Grant{}, fmt.Errorf("grant %s: decode approved_by: %w", w.id, err)
	}
	return store.NormalizeGrant(g), nil
}

func scanGrant(rows *sql.Rows) (grant.Grant, error) {
	var w grantRow
	if err := rows.Scan(w.dest()...); err != nil {
		return grant.Grant{}, err
	}
	return w.decode()
}

func getGrant(ctx context.Context, q querier, id string) (grant.Grant, error) {
	var w grantRow
	err := q.queryRow(ctx, `SELECT `+grantColumns+` FROM grants WHERE id = ?`, id).Scan(w.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return grant.Grant{}, store.ErrNotFound
	}
	if err != nil {
		return grant.Grant{}, err
	}
	return w.decode()
}

// UpdateRequestGranting runs fn on request id like UpdateRequest and, in
// the same transaction, inserts the grant fn returns (if any) with its
// grant_created event. See store.GrantStore.
func (db *DB) UpdateRequestGranting(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) (*grant.Grant, error)) (approval.Request, *grant.Grant, error) {
	var (
		out   approval.Request
		made  *grant.Grant
		fnErr error
	)
	err := db.inTx(ctx, func(t *tx) error {
		out, made, fnErr = approval.Request{}, nil, nil
		old, err := t.lockedRequest(ctx, id)
		if err != nil {
			return err
		}
		cur, err := old.decode()
		if err != nil {
			return err
		}
		g, err := fn(&cur)
		if err != nil {
			fnErr = err
			return err
		}
		if cur.ID != id {
			return fmt.Errorf("update changed the request id to %q", cur.ID)
		}
		if out, err = t.storeRequest(ctx, old, cur, actor, db.now()); err != nil {
			return err
		}
		if g == nil {
			return nil
		}
		stored, err := t.insertGrant(ctx, *g, actor)
		made = &stored
		return err
	})
	switch {
	case fnErr != nil:
		return approval.Request{}, nil, fnErr
	case err != nil:
		return approval.Request{}, nil, db.wrap("update request "+string(id)+" with a grant", err)
	}
	return out, made, nil
}

// insertGrant inserts g as a new grant (no uses, not revoked) with its
// grant_created event by actor at g.CreatedAt.
func (t *tx) insertGrant(ctx context.Context, g grant.Grant, actor string) (grant.Grant, error) {
	switch {
	case g.ID == "" || g.Principal == "" || g.Server == "" || g.Tool == "" || g.SourceApproval == "":
		return grant.Grant{}, errors.New("insert grant: id, principal, server, tool and source approval are required")
	case g.CreatedAt.IsZero() || !g.ExpiresAt.After(g.CreatedAt):
		return grant.Grant{}, fmt.Errorf("insert grant %s: created_at and a later expires_at are required", g.ID)
	case g.MaxUses < 0:
		return grant.Grant{}, fmt.Errorf("insert grant %s: negative max_uses", g.ID)
	}
	g.Uses, g.RevokedAt, g.RevokedBy, g.RevokeReason = 0, time.Time{}, "", ""
	w, err := encodeGrant(g)
	if err != nil {
		return grant.Grant{}, err
	}
	res, err := t.exec(ctx, orderedInsert(t.d, "grants", grantColumns, numGrantColumns)+` ON CONFLICT DO NOTHING`, w.args()...)
	if err != nil {
		return grant.Grant{}, fmt.Errorf("insert grant %s: %w", g.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return grant.Grant{}, err
	} else if n == 0 {
		return grant.Grant{}, fmt.Errorf("grant %s (or a grant of approval %s): %w", g.ID, g.SourceApproval, store.ErrAlreadyExists)
	}
	ev := store.GrantEvent(g.ID, grant.EventCreated, actor, g.CreatedAt)
	if err := t.writeEvents(ctx, eventRows(ev)); err != nil {
		return grant.Grant{}, err
	}
	return w.decode()
}

// GetGrant returns grant id or store.ErrNotFound.
func (db *DB) GetGrant(ctx context.Context, id string) (grant.Grant, error) {
	g, err := getGrant(ctx, db, id)
	if err != nil {
		return grant.Grant{}, db.wrap("get grant "+id, err)
	}
	return g, nil
}

// usableAt is the SQL condition of a grant usable at a time given as the
// one parameter (unix milliseconds).
const usableAt = `revoked_at IS NULL AND expires_at > ? AND (max_uses = 0 OR uses < max_uses)`

// ListGrants returns one page of grants matching f in list order (as
// ListRequests pages requests: the order in which the store created the
// grants, whatever their ids' clocks say; listpage.go), and the cursor of
// the next page ("" when this page is the last): a reader that follows
// the cursors to "" lists every matching grant created before it read its
// last page. It reads on the pool reserved for people and their tools
// (AdminConns), as ListRequests does. A cursor that no list returned is
// an error wrapping store.ErrBadCursor; a grant id (the cursor before
// list orders) is still one.
func (db *DB) ListGrants(ctx context.Context, f store.GrantFilter) ([]grant.Grant, string, error) {
	var (
		w  grantRow
		gs []grant.Grant
	)
	l := lister[grant.Grant]{db: db, reads: db.adminReads(), what: "list grants", src: grantList(f), row: &w,
		key: func(g *grant.Grant) (approval.ID, int) { return approval.ID(g.ID), 0 }}
	next, err := l.each(ctx, f.Cursor, f.Limit, func(g grant.Grant) error {
		gs = append(gs, g)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return gs, next, nil
}

// grantList is the listSource of the grants list for f.
func grantList(f store.GrantFilter) listSource {
	src := listSource{table: "grants", cols: grantColumns}
	add := func(cond string, vs ...any) {
		src.where = append(src.where, cond)
		src.args = append(src.args, vs...)
	}
	for _, c := range []struct{ col, v string }{{"tenant", f.Tenant}, {"principal", f.Principal}, {"server", f.Server}, {"tool", f.Tool}} {
		if c.v != "" {
			add(c.col+` = ?`, c.v)
		}
	}
	if !f.UsableAt.IsZero() {
		add(usableAt, f.UsableAt.UnixMilli())
	}
	if f.IDPrefix != "" {
		add(`id >= ? AND substr(id, 1, length(CAST(? AS TEXT))) = ?`, f.IDPrefix, f.IDPrefix, f.IDPrefix)
	}
	if f.IDSuffix != "" {
		add(`length(id) >= length(CAST(? AS TEXT)) AND substr(id, length(id) - length(CAST(? AS TEXT)) + 1) = ?`, f.IDSuffix, f.IDSuffix, f.IDSuffix)
	}
	return src
}

// UsableGrants returns principal's grants for (server, tool) usable at now,
// oldest first, at most 100.
func (db *DB) UsableGrants(ctx context.Context, principal, server, tool string, now time.Time) ([]grant.Grant, error) {
	rows, err := db.query(ctx, `SELECT `+grantColumns+` FROM grants
		WHERE principal = ? AND server = ? AND tool = ? AND `+usableAt+`
		ORDER BY id LIMIT 100`, principal, server, tool, now.UnixMilli())
	gs, err := collect(rows, err, scanGrant)
	if err != nil {
		return nil, db.wrap("find usable grants", err)
	}
	return gs, nil
}

// UseGrant counts one use of grant id with a conditional update, records
// it and writes its grant_used event, in one transaction. See
// store.GrantStore.
func (db *DB) UseGrant(ctx context.Context, id string, u grant.Use) (grant.Grant, error) {
	if u.At.IsZero() || u.Principal == "" {
		return grant.Grant{}, fmt.Errorf("use grant %s: at and principal are required", id)
	}
	var out grant.Grant
	err := db.inTx(ctx, func(t *tx) error {
		// The WHERE clause is the compare-and-set: on Postgres a concurrent
		// use waits for the row and re-checks it (READ COMMITTED), so the
		// count never passes max_uses and never follows a revocation.
		res, err := t.exec(ctx, `UPDATE grants SET uses = uses + 1 WHERE id = ? AND `+usableAt, id, u.At.UnixMilli())
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			g, err := getGrant(ctx, t, id)
			if err != nil {
				return err
			}
			return fmt.Errorf("grant %s is %s: %w", id, g.State(u.At), grant.ErrSpent)
		}
		if out, err = getGrant(ctx, t, id); err != nil {
			return err
		}
		if _, err := t.exec(ctx, `INSERT INTO grant_uses (grant_id, n, at, principal, session_id, arguments_hash) VALUES (?, ?, ?, ?, ?, ?)`,
			id, out.Uses, u.At.UnixMilli(), u.Principal, u.Session, u.ArgumentsHash); err != nil {
			return fmt.Errorf("record use %d of grant %s: %w", out.Uses, id, err)
		}
		return t.writeEvents(ctx, eventRows(store.GrantEvent(id, grant.EventUsed, u.Principal, u.At)))
	})
	if err != nil {
		return grant.Grant{}, db.wrap("use grant "+id, err)
	}
	return out, nil
}

// GrantUses returns the latest uses of grant id, newest first.
func (db *DB) GrantUses(ctx context.Context, id string, limit int) ([]grant.Use, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	rows, err := db.query(ctx, `SELECT grant_id, n, at, principal, session_id, arguments_hash FROM grant_uses
		WHERE grant_id = ? ORDER BY n DESC LIMIT ?`, id, limit)
	us, err := collect(rows, err, func(rows *sql.Rows) (grant.Use, error) {
		var (
			u  grant.Use
			at int64
		)
		err := rows.Scan(&u.GrantID, &u.N, &at, &u.Principal, &u.Session, &u.ArgumentsHash)
		u.At = fromMillis(at)
		return u, err
	})
	if err != nil {
		return nil, db.wrap("list uses of grant "+id, err)
	}
	return us, nil
}

// RevokeGrant revokes grant id with its grant_revoked event in one
// transaction. See store.GrantStore.
func (db *DB) RevokeGrant(ctx context.Context, id, actor, reason string, now time.Time) (grant.Grant, bool, error) {
	var (
		out     grant.Grant
		changed bool
	)
	err := db.inTx(ctx, func(t *tx) error {
		changed = false
		res, err := t.exec(ctx, `UPDATE grants SET revoked_at = ?, revoked_by = ?, revoke_reason = ? WHERE id = ? AND revoked_at IS NULL`,
			store.Millis(now).UnixMilli(), actor, reason, id)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if out, err = getGrant(ctx, t, id); err != nil {
			return err
		}
		if n == 0 {
			return nil // already revoked
		}
		changed = true
		return t.writeEvents(ctx, eventRows(store.GrantEvent(id, grant.EventRevoked, actor, now)))
	})
	if err != nil {
		return grant.Grant{}, false, db.wrap("revoke grant "+id, err)
	}
	return out, changed, nil
}
