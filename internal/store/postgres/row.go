package postgres

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"toolgate/internal/approval"
)

// columns lists the requests columns in the order of row.args and row.dest.
const columns = `id, state, server, tool, arguments, arguments_hash, display_warnings,
	tool_digest, rule, mode, requested_by, on_behalf_of, tenant, created_at, expires_at,
	required_approvals, approvers, valid_for_ms, reviews, decided_by, decided_at, reason,
	consumed_at, dispatch_outcome, held_by, lease_until, answered_at, kind, target, base_revision`

// numColumns is the number of names in columns.
const numColumns = 30

// row is one requests row as stored: times as unix milliseconds UTC (the
// optional ones NULL when zero), lists as JSON text. It is comparable, so
// an unchanged request can be detected with ==.
type row struct {
	id, state, server, tool string
	arguments               pgtype.Text
	argumentsHash           string
	displayWarnings         string
	toolDigest, rule, mode  string
	requestedBy, onBehalfOf string
	tenant                  string
	createdAt, expiresAt    int64
	requiredApprovals       int64
	approvers               string
	validForMS              int64
	reviews                 string
	decidedBy               string
	decidedAt               pgtype.Int8
	reason                  string
	consumedAt              pgtype.Int8
	dispatchOutcome, heldBy string
	leaseUntil              pgtype.Int8
	answeredAt              pgtype.Int8
	kind, target            string
	baseRevision            int64
}

// storedReview is the JSON form of an approval.Review inside the reviews
// column; At is unix milliseconds UTC like every other stored time. It is
// the same form the SQLite backend stores.
type storedReview struct {
	By      string           `json:"by"`
	Verdict approval.Verdict `json:"verdict"`
	Reason  string           `json:"reason,omitempty"`
	At      int64            `json:"at_ms"`
}

// args returns the values of the row in column order.
func (w *row) args() []any {
	return []any{w.id, w.state, w.server, w.tool, w.arguments, w.argumentsHash, w.displayWarnings,
		w.toolDigest, w.rule, w.mode, w.requestedBy, w.onBehalfOf, w.tenant, w.createdAt, w.expiresAt,
		w.requiredApprovals, w.approvers, w.validForMS, w.reviews, w.decidedBy, w.decidedAt, w.reason,
		w.consumedAt, w.dispatchOutcome, w.heldBy, w.leaseUntil, w.answeredAt, w.kind, w.target, w.baseRevision}
}

// dest returns pointers to the fields of the row in column order, for Scan.
func (w *row) dest() []any {
	return []any{&w.id, &w.state, &w.server, &w.tool, &w.arguments, &w.argumentsHash, &w.displayWarnings,
		&w.toolDigest, &w.rule, &w.mode, &w.requestedBy, &w.onBehalfOf, &w.tenant, &w.createdAt, &w.expiresAt,
		&w.requiredApprovals, &w.approvers, &w.validForMS, &w.reviews, &w.decidedBy, &w.decidedAt, &w.reason,
		&w.consumedAt, &w.dispatchOutcome, &w.heldBy, &w.leaseUntil, &w.answeredAt, &w.kind, &w.target, &w.baseRevision}
}

// toRow encodes r for storage, truncating times and ValidFor to milliseconds.
func toRow(r approval.Request) (row, error) {
	w := row{
		id: string(r.ID), state: string(r.State), server: r.Server, tool: r.Tool,
		argumentsHash: r.ArgumentsHash, toolDigest: r.ToolDigest, rule: r.Rule, mode: r.Mode,
		requestedBy: r.RequestedBy, onBehalfOf: r.OnBehalfOf, tenant: r.Tenant,
		createdAt: millis(r.CreatedAt), expiresAt: millis(r.ExpiresAt),
		requiredApprovals: int64(r.RequiredApprovals), validForMS: r.ValidFor.Milliseconds(),
		decidedBy: r.DecidedBy, decidedAt: nullMillis(r.DecidedAt), reason: r.Reason,
		consumedAt: nullMillis(r.ConsumedAt), dispatchOutcome: string(r.DispatchOutcome),
		heldBy: r.HeldBy, leaseUntil: nullMillis(r.LeaseUntil), answeredAt: nullMillis(r.AnsweredAt),
		kind: r.Kind, target: r.Target, baseRevision: r.BaseRevision,
	}
	if r.Arguments != nil {
		w.arguments = pgtype.Text{String: string(r.Arguments), Valid: true}
	}
	var err error
	if w.displayWarnings, err = jsonText(r.DisplayWarnings); err != nil {
		return row{}, fmt.Errorf("encode display_warnings: %w", err)
	}
	if w.approvers, err = jsonText(r.Approvers); err != nil {
		return row{}, fmt.Errorf("encode approvers: %w", err)
	}
	var rvs []storedReview
	if r.Reviews != nil {
		rvs = make([]storedReview, len(r.Reviews))
		for i, rv := range r.Reviews {
			rvs[i] = storedReview{By: rv.By, Verdict: rv.Verdict, Reason: rv.Reason, At: millis(rv.At)}
		}
	}
	if w.reviews, err = jsonText(rvs); err != nil {
		return row{}, fmt.Errorf("encode reviews: %w", err)
	}
	return w, nil
}

// request decodes the row. Each call returns fresh slices.
func (w *row) request() (approval.Request, error) {
	r := approval.Request{
		ID: approval.ID(w.id), State: approval.State(w.state), Server: w.server, Tool: w.tool,
		ArgumentsHash: w.argumentsHash, ToolDigest: w.toolDigest, Rule: w.rule, Mode: w.mode,
		RequestedBy: w.requestedBy, OnBehalfOf: w.onBehalfOf, Tenant: w.tenant,
		CreatedAt: fromMillis(w.createdAt), ExpiresAt: fromMillis(w.expiresAt),
		RequiredApprovals: int(w.requiredApprovals), ValidFor: time.Duration(w.validForMS) * time.Millisecond,
		DecidedBy: w.decidedBy, DecidedAt: fromNullMillis(w.decidedAt), Reason: w.reason,
		ConsumedAt: fromNullMillis(w.consumedAt), DispatchOutcome: approval.Outcome(w.dispatchOutcome),
		HeldBy: w.heldBy, LeaseUntil: fromNullMillis(w.leaseUntil), AnsweredAt: fromNullMillis(w.answeredAt),
		Kind: w.kind, Target: w.target, BaseRevision: w.baseRevision,
	}
	if w.arguments.Valid {
		r.Arguments = json.RawMessage(w.arguments.String)
	}
	if err := json.Unmarshal([]byte(w.displayWarnings), &r.DisplayWarnings); err != nil {
		return approval.Request{}, fmt.Errorf("decode display_warnings of %s: %w", w.id, err)
	}
	if err := json.Unmarshal([]byte(w.approvers), &r.Approvers); err != nil {
		return approval.Request{}, fmt.Errorf("decode approvers of %s: %w", w.id, err)
	}
	var rvs []storedReview
	if err := json.Unmarshal([]byte(w.reviews), &rvs); err != nil {
		return approval.Request{}, fmt.Errorf("decode reviews of %s: %w", w.id, err)
	}
	if rvs != nil {
		r.Reviews = make([]approval.Review, len(rvs))
		for i, rv := range rvs {
			r.Reviews[i] = approval.Review{By: rv.By, Verdict: rv.Verdict, Reason: rv.Reason, At: fromMillis(rv.At)}
		}
	}
	return r, nil
}

// jsonText marshals v; a nil slice becomes "null", so nil and empty lists
// keep their difference.
func jsonText(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// millis returns t as unix milliseconds; the zero time maps to 0 so it can
// round-trip through fromMillis.
func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// fromMillis is the inverse of millis: 0 is the zero time, anything else a
// time in UTC.
func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func nullMillis(t time.Time) pgtype.Int8 {
	if t.IsZero() {
		return pgtype.Int8{}
	}
	return pgtype.Int8{Int64: t.UnixMilli(), Valid: true}
}

func fromNullMillis(n pgtype.Int8) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.UnixMilli(n.Int64).UTC()
}

// params returns "$from, $from+1, …" with n parameters.
func params(from, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("$")
		b.WriteString(strconv.Itoa(from + i))
	}
	return b.String()
}
