package sqlstore

// The row codec: approval requests and sessions as both dialects store
// them. Times are INTEGER/bigint unix milliseconds UTC (NULL when unset,
// for the optional ones), durations milliseconds, lists and maps JSON text,
// and the display copy of the arguments text kept byte for byte. The row
// types use database/sql's Null types. Rows are comparable, so an unchanged
// value can be detected with ==.

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
)

// requestColumns lists the requests columns in the order of
// requestRow.args and requestRow.dest; numRequestColumns counts them.
const requestColumns = `id, state, server, tool, arguments, arguments_hash, display_warnings,
	tool_digest, rule, mode, requested_by, on_behalf_of, tenant, created_at, expires_at,
	required_approvals, approvers, valid_for_ms, reviews, decided_by, decided_at, reason,
	consumed_at, dispatch_outcome, held_by, lease_until, answered_at, kind, target, base_revision,
	policy_revision, consume_token, timeout_rule, no_grants`

// numRequestColumns is the number of names in requestColumns.
const numRequestColumns = 34

// leaseMarker is the value of requests.lease_until that says "the lease
// of my holder's instance" (migration 14, docs/architecture.md "Instance
// leases"): the request's effective lease is instance_leases.lease_until
// of its held_by, renewed once per instance instead of once per request.
// It is 9999-12-31T23:59:59.999Z in unix milliseconds, so a binary from
// before migration 14, which reads it as a concrete time, sees the request
// held and never takes it over or sweeps it (see docs/deploy.md).
const leaseMarker int64 = 253402300799999

// requestSelect is the select list that reads a requests row for
// requestRow.dest: requestColumns, then the lease of the holder's instance
// when the row carries leaseMarker (NULL otherwise, and when the instance
// has no lease row). It must read FROM requests without an alias.
const requestSelect = requestColumns + `,
	CASE WHEN requests.lease_until = 253402300799999 THEN
		(SELECT l.lease_until FROM instance_leases l WHERE l.instance = requests.held_by) END`

// effectiveLease is the SQL expression of a request's effective lease
// (unix ms; 0 when its instance has no lease row), for conditions on it
// in queries that read FROM requests without an alias.
const effectiveLease = `CASE WHEN requests.lease_until = 253402300799999 THEN
		COALESCE((SELECT l.lease_until FROM instance_leases l WHERE l.instance = requests.held_by), 0)
		ELSE requests.lease_until END`

// requestRow is one requests row as stored.
type requestRow struct {
	id, state, server, tool string
	arguments               sql.NullString
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
	decidedAt               sql.NullInt64
	reason                  string
	consumedAt              sql.NullInt64
	dispatchOutcome, heldBy string
	leaseUntil              sql.NullInt64
	answeredAt              sql.NullInt64
	kind, target            string
	baseRevision            int64
	policyRevision          string
	consumeToken            string
	timeoutRule             string
	noGrants                int64 // 1: approval.Request.NoGrants
	// holderLease is read, not stored: the lease of the holder's
	// instance when leaseUntil is leaseMarker (see requestSelect).
	holderLease sql.NullInt64
}

// storedReview is the JSON form of an approval.Review inside the reviews
// column; At is unix milliseconds UTC like every other stored time.
type storedReview struct {
	By      string           `json:"by"`
	Verdict approval.Verdict `json:"verdict"`
	Reason  string           `json:"reason,omitempty"`
	At      int64            `json:"at_ms"`
	Grant   *storedTerms     `json:"grant,omitempty"`
}

// storedTerms is the JSON form of the approval.GrantTerms of a review; the
// duration is in milliseconds.
type storedTerms struct {
	When           string   `json:"when,omitempty"`
	TTL            int64    `json:"ttl_ms"`
	MaxUses        int64    `json:"max_uses,omitempty"`
	ReviewerGroups []string `json:"reviewer_groups,omitempty"`
}

func encodeTerms(t *approval.GrantTerms) *storedTerms {
	if t == nil {
		return nil
	}
	return &storedTerms{When: t.When, TTL: t.TTL.Milliseconds(), MaxUses: t.MaxUses, ReviewerGroups: t.ReviewerGroups}
}

func (t *storedTerms) decode() *approval.GrantTerms {
	if t == nil {
		return nil
	}
	return &approval.GrantTerms{When: t.When, TTL: time.Duration(t.TTL) * time.Millisecond, MaxUses: t.MaxUses, ReviewerGroups: t.ReviewerGroups}
}

// args returns the values of the row in requestColumns order.
func (w *requestRow) args() []any {
	return []any{w.id, w.state, w.server, w.tool, w.arguments, w.argumentsHash, w.displayWarnings,
		w.toolDigest, w.rule, w.mode, w.requestedBy, w.onBehalfOf, w.tenant, w.createdAt, w.expiresAt,
		w.requiredApprovals, w.approvers, w.validForMS, w.reviews, w.decidedBy, w.decidedAt, w.reason,
		w.consumedAt, w.dispatchOutcome, w.heldBy, w.leaseUntil, w.answeredAt, w.kind, w.target, w.baseRevision,
		w.policyRevision, w.consumeToken, w.timeoutRule, w.noGrants}
}

// dest returns pointers to the fields of the row in requestSelect order, for Scan.
func (w *requestRow) dest() []any { return w.destWith() }

// destWith is dest followed by more destinations, in one slice: appending
// them to dest's made a second, larger copy of its 35 (≈ 1 KB per
// Postgres decision, consume or outcome: alloc41).
func (w *requestRow) destWith(more ...any) []any {
	d := append(make([]any, 0, 35+len(more)), &w.id, &w.state, &w.server, &w.tool, &w.arguments, &w.argumentsHash, &w.displayWarnings,
		&w.toolDigest, &w.rule, &w.mode, &w.requestedBy, &w.onBehalfOf, &w.tenant, &w.createdAt, &w.expiresAt,
		&w.requiredApprovals, &w.approvers, &w.validForMS, &w.reviews, &w.decidedBy, &w.decidedAt, &w.reason,
		&w.consumedAt, &w.dispatchOutcome, &w.heldBy, &w.leaseUntil, &w.answeredAt, &w.kind, &w.target, &w.baseRevision,
		&w.policyRevision, &w.consumeToken, &w.timeoutRule, &w.noGrants, &w.holderLease)
	return append(d, more...)
}

// encodeRequest encodes r for storage, truncating times and ValidFor to
// milliseconds.
func encodeRequest(r approval.Request) (requestRow, error) {
	w := requestRow{
		id: string(r.ID), state: string(r.State), server: r.Server, tool: r.Tool,
		argumentsHash: r.ArgumentsHash, toolDigest: r.ToolDigest, rule: r.Rule, mode: r.Mode,
		requestedBy: r.RequestedBy, onBehalfOf: r.OnBehalfOf, tenant: r.Tenant,
		createdAt: millis(r.CreatedAt), expiresAt: millis(r.ExpiresAt),
		requiredApprovals: int64(r.RequiredApprovals), validForMS: r.ValidFor.Milliseconds(),
		decidedBy: r.DecidedBy, decidedAt: nullMillis(r.DecidedAt), reason: r.Reason,
		consumedAt: nullMillis(r.ConsumedAt), dispatchOutcome: string(r.DispatchOutcome),
		heldBy: r.HeldBy, leaseUntil: nullMillis(r.LeaseUntil), answeredAt: nullMillis(r.AnsweredAt),
		kind: r.Kind, target: r.Target, baseRevision: r.BaseRevision, policyRevision: r.PolicyRevision,
		consumeToken: r.ConsumeToken, timeoutRule: r.TimeoutRule,
	}
	if r.NoGrants {
		w.noGrants = 1
	}
	if w.leaseUntil.Int64 == leaseMarker {
		return requestRow{}, fmt.Errorf("lease_until %v is reserved", r.LeaseUntil)
	}
	if r.Arguments != nil {
		w.arguments = sql.NullString{String: string(r.Arguments), Valid: true}
	}
	var err error
	if w.displayWarnings, err = jsonText(r.DisplayWarnings); err != nil {
		return requestRow{}, fmt.Errorf("encode display_warnings: %w", err)
	}
	if w.approvers, err = jsonText(r.Approvers); err != nil {
		return requestRow{}, fmt.Errorf("encode approvers: %w", err)
	}
	var rvs []storedReview
	if r.Reviews != nil {
		rvs = make([]storedReview, len(r.Reviews))
		for i, rv := range r.Reviews {
			rvs[i] = storedReview{By: rv.By, Verdict: rv.Verdict, Reason: rv.Reason, At: millis(rv.At), Grant: encodeTerms(rv.Grant)}
		}
	}
	if w.reviews, err = jsonText(rvs); err != nil {
		return requestRow{}, fmt.Errorf("encode reviews: %w", err)
	}
	return w, nil
}

// decode decodes the row. Each call returns fresh slices.
func (w *requestRow) decode() (approval.Request, error) {
	r := approval.Request{
		ID: approval.ID(w.id), State: approval.State(w.state), Server: w.server, Tool: w.tool,
		ArgumentsHash: w.argumentsHash, ToolDigest: w.toolDigest, Rule: w.rule, Mode: w.mode,
		RequestedBy: w.requestedBy, OnBehalfOf: w.onBehalfOf, Tenant: w.tenant,
		CreatedAt: fromMillis(w.createdAt), ExpiresAt: fromMillis(w.expiresAt),
		RequiredApprovals: int(w.requiredApprovals), ValidFor: time.Duration(w.validForMS) * time.Millisecond,
		DecidedBy: w.decidedBy, DecidedAt: fromNullMillis(w.decidedAt), Reason: w.reason,
		ConsumedAt: fromNullMillis(w.consumedAt), DispatchOutcome: approval.Outcome(w.dispatchOutcome),
		HeldBy: w.heldBy, LeaseUntil: fromNullMillis(w.leaseUntil), AnsweredAt: fromNullMillis(w.answeredAt),
		Kind: w.kind, Target: w.target, BaseRevision: w.baseRevision, PolicyRevision: w.policyRevision,
		ConsumeToken: w.consumeToken, TimeoutRule: w.timeoutRule, NoGrants: w.noGrants != 0,
	}
	if w.leaseUntil.Valid && w.leaseUntil.Int64 == leaseMarker {
		r.LeaseUntil = fromNullMillis(w.holderLease)
	}
	if w.arguments.Valid {
		r.Arguments = json.RawMessage(w.arguments.String)
	}
	// The lists are decoded into their own variables (decodeStrings,
	// decodeList), never through a pointer into r, which would move r
	// (≈ 600 bytes) to the heap on every read of a request.
	var err error
	if r.DisplayWarnings, err = decodeStrings(w.displayWarnings); err != nil {
		return approval.Request{}, fmt.Errorf("decode display_warnings of %s: %w", w.id, err)
	}
	if r.Approvers, err = decodeStrings(w.approvers); err != nil {
		return approval.Request{}, fmt.Errorf("decode approvers of %s: %w", w.id, err)
	}
	rvs, err := decodeList[storedReview](w.reviews)
	if err != nil {
		return approval.Request{}, fmt.Errorf("decode reviews of %s: %w", w.id, err)
	}
	if rvs != nil {
		r.Reviews = make([]approval.Review, len(rvs))
		for i, rv := range rvs {
			r.Reviews[i] = approval.Review{By: rv.By, Verdict: rv.Verdict, Reason: rv.Reason, At: fromMillis(rv.At), Grant: rv.Grant.decode()}
		}
	}
	return r, nil
}

// decodeList is json.Unmarshal of text, a JSON list as jsonText wrote it,
// into a nil []T: "null" gives nil and "[]" an empty list, not nil,
// as json.Unmarshal does, without its copy of text and its decoder (most
// requests' warnings, approvers and reviews are one or the other; every
// read of a request decodes all three).
func decodeList[T any](text string) ([]T, error) {
	switch text {
	case "null":
		return nil, nil
	case "[]":
		return []T{}, nil
	}
	var out []T // declared here: only this path moves it to the heap
	err := json.Unmarshal([]byte(text), &out)
	return out, err
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

// fromMillis is the inverse of Millis: 0 is the zero time, anything else a
// time in UTC.
func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// nullMillis is Millis for an optional time: NULL when t is zero.
func nullMillis(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
}

// fromNullMillis is the inverse of nullMillis.
func fromNullMillis(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.UnixMilli(n.Int64).UTC()
}

// sessionColumns lists the sessions columns in the order of sessionRow.args
// and sessionRow.dest; numSessionColumns counts them.
const sessionColumns = `id, parent_id, principal, on_behalf_of, tenant, token_hash, mode, tools,
	require_approval, revision, created_at, created_by, revoked_at`

// numSessionColumns is the number of names in sessionColumns.
const numSessionColumns = 13

// sessionRow is one sessions row as stored. Its fields are the columns, read
// directly for partial updates.
type sessionRow struct {
	ID              string
	ParentID        sql.NullString
	Principal       string
	OnBehalfOf      string
	Tenant          string
	TokenHash       string
	Mode            string
	Tools           string
	RequireApproval string
	Revision        int64
	CreatedAt       int64
	CreatedBy       string
	RevokedAt       sql.NullInt64
}

// args returns the values of the row in sessionColumns order.
func (w *sessionRow) args() []any {
	return []any{w.ID, w.ParentID, w.Principal, w.OnBehalfOf, w.Tenant, w.TokenHash, w.Mode, w.Tools,
		w.RequireApproval, w.Revision, w.CreatedAt, w.CreatedBy, w.RevokedAt}
}

// dest returns pointers to the fields of the row in sessionColumns order, for Scan.
func (w *sessionRow) dest() []any {
	return []any{&w.ID, &w.ParentID, &w.Principal, &w.OnBehalfOf, &w.Tenant, &w.TokenHash, &w.Mode, &w.Tools,
		&w.RequireApproval, &w.Revision, &w.CreatedAt, &w.CreatedBy, &w.RevokedAt}
}

// encodeSession normalizes s (store.NormalizeSession) and encodes it.
func encodeSession(s session.Session) (sessionRow, error) {
	s = store.NormalizeSession(s)
	tools, err := jsonText(s.Tools)
	if err != nil {
		return sessionRow{}, err
	}
	ra, err := jsonText(s.RequireApproval)
	if err != nil {
		return sessionRow{}, err
	}
	return sessionRow{
		ID: string(s.ID), ParentID: sql.NullString{String: string(s.ParentID), Valid: s.ParentID != ""}, Principal: s.Principal,
		OnBehalfOf: s.OnBehalfOf, Tenant: s.Tenant, TokenHash: s.TokenHash, Mode: string(s.Mode),
		Tools: tools, RequireApproval: ra, Revision: s.Revision, CreatedAt: millis(s.CreatedAt),
		CreatedBy: s.CreatedBy, RevokedAt: nullMillis(s.RevokedAt),
	}, nil
}

// decode decodes the row into a normalized session.
func (w *sessionRow) decode() (session.Session, error) {
	s := session.Session{
		ID: session.ID(w.ID), ParentID: session.ID(w.ParentID.String), Principal: w.Principal,
		OnBehalfOf: w.OnBehalfOf, Tenant: w.Tenant, TokenHash: w.TokenHash, Mode: session.Mode(w.Mode),
		Revision: w.Revision, CreatedAt: fromMillis(w.CreatedAt), CreatedBy: w.CreatedBy,
		RevokedAt: fromNullMillis(w.RevokedAt),
	}
	if err := json.Unmarshal([]byte(w.Tools), &s.Tools); err != nil {
		return session.Session{}, fmt.Errorf("session %s: decode Tools: %w", w.ID, err)
	}
	if err := json.Unmarshal([]byte(w.RequireApproval), &s.RequireApproval); err != nil {
		return session.Session{}, fmt.Errorf("session %s: decode require_approval: %w", w.ID, err)
	}
	return store.NormalizeSession(s), nil
}
