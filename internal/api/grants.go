package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/grant"
	"toolgate/internal/store"
)

// Grants is what the API needs for remembered grants (issue 12). The gate
// implements it. Implementations must be safe for concurrent use.
type Grants interface {
	// ApproveWithGrant approves id as reviewer with grant terms attached
	// and returns the request after the change and the grant it made (nil
	// when none was made yet). Errors: those of Approvals.Review,
	// grant.ErrInvalid, grant.ErrNotEndorsed, grant.ErrForbidden,
	// approval.ErrGrantKind.
	ApproveWithGrant(ctx context.Context, id approval.ID, reviewer approval.Principal, reason, pinnedHash string, terms approval.GrantTerms) (approval.Request, *grant.Grant, error)
	// ListGrants returns one page of grants and the next cursor.
	ListGrants(ctx context.Context, f store.GrantFilter) ([]grant.Grant, string, error)
	// GetGrant returns a grant or an error wrapping store.ErrNotFound.
	GetGrant(ctx context.Context, id string) (grant.Grant, error)
	// GrantUses returns the latest uses of a grant, newest first.
	GrantUses(ctx context.Context, id string, limit int) ([]grant.Use, error)
	// RevokeGrant revokes a grant (committed before it returns) and
	// returns it; a revoked grant is returned unchanged. An actor with a
	// tenant gets store.ErrNotFound for another tenant's grant.
	RevokeGrant(ctx context.Context, actor approval.Principal, id, reason string) (grant.Grant, error)
}

// CodeGrantNotEndorsed is the 409 code of an approve whose grant terms
// fewer approvers than the approval's quorum attached.
const CodeGrantNotEndorsed = "grant_not_endorsed"

// CodeGrantsForbidden is the 409 code of an approve with grant terms on a
// call for which grants are turned off (grant.ErrForbidden: a rule's
// approval.grants: false, or the config's grants.enabled: false).
const CodeGrantsForbidden = "grants_forbidden"

// maxPredicate bounds a grant's when, in bytes (the policy's limit on
// expressions is in characters; this keeps bodies small before parsing).
const maxPredicate = 16 << 10

// GrantBody is the "grant" object of an approve body: remember this
// approval as a grant for the requesting principal, server and tool, for
// Duration (Go syntax: "90m", "1h"; at most the server's grants.max_ttl,
// never shortened: a longer one is 422), at most MaxUses calls (0 or
// absent: no cap), for arguments matching When (a CEL condition like a
// rule's when; absent: any arguments). On an approval needing N approvals
// the grant is made only when N approvers attach the same grant.
type GrantBody struct {
	Duration string `json:"duration"`
	MaxUses  int64  `json:"max_uses,omitempty"`
	When     string `json:"when,omitempty"`
}

// GrantTerms is the wire form of the grant terms an approver attached to
// a review (Review.Grant).
type GrantTerms struct {
	Duration string `json:"duration"`
	MaxUses  int64  `json:"max_uses,omitempty"`
	When     string `json:"when,omitempty"`
}

// Grant is the JSON form of a remembered grant. State is computed with the
// server's clock: active, expired, exhausted (max_uses reached) or revoked.
type Grant struct {
	ID         string `json:"id"`
	State      string `json:"state"`
	Principal  string `json:"principal"`
	OnBehalfOf string `json:"on_behalf_of,omitempty"`
	Tenant     string `json:"tenant"`
	Server     string `json:"server"`
	Tool       string `json:"tool"`
	// When is the predicate the arguments must satisfy; "" means any.
	When      string    `json:"when"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// MaxUses is 0 when only the expiry limits the grant.
	MaxUses    int64           `json:"max_uses"`
	Uses       int64           `json:"uses"`
	CreatedBy  string          `json:"created_by"`
	ApprovedBy []GrantApprover `json:"approved_by"`
	// Approvals is the quorum of the approval the grant was attached to.
	Approvals      int       `json:"approvals"`
	Reason         string    `json:"reason,omitempty"`
	SourceApproval string    `json:"source_approval"`
	Rule           string    `json:"rule"`
	RevokedAt      time.Time `json:"revoked_at,omitzero"`
	RevokedBy      string    `json:"revoked_by,omitempty"`
	RevokeReason   string    `json:"revoke_reason,omitempty"`
	// RecentUses are the latest uses, newest first (GET /v1/grants/{id}
	// only).
	RecentUses []GrantUse `json:"recent_uses,omitempty"`
}

// GrantApprover is one approver of a grant, with its groups when it
// approved.
type GrantApprover struct {
	ID     string   `json:"id"`
	Groups []string `json:"groups"`
}

// GrantUse is one call a grant allowed.
type GrantUse struct {
	N             int64     `json:"n"`
	At            time.Time `json:"at"`
	Principal     string    `json:"principal"`
	Session       string    `json:"session,omitempty"`
	ArgumentsHash string    `json:"arguments_hash"`
}

// GrantList is the body of GET /v1/grants.
type GrantList struct {
	Grants     []Grant `json:"grants"`
	NextCursor string  `json:"next_cursor"`
}

// RevokeBody is the body of POST /v1/grants/{id}/revoke; reason is
// optional.
type RevokeBody struct {
	Reason string `json:"reason,omitempty"`
}

// recentUses is how many uses GET /v1/grants/{id} shows.
const recentUses = 20

// routeGrants mounts the grant routes: any reading role lists and reads;
// approvers and admins revoke (revoking only ever narrows).
func (s *Server) routeGrants() {
	s.mux.Handle("GET /v1/grants", s.handle(s.require(readRoles, s.listGrants)))
	s.mux.Handle("GET /v1/grants/{id}", s.handle(s.require(readRoles, s.getGrant)))
	s.mux.Handle("POST /v1/grants/{id}/revoke", s.handle(s.require(reviewRoles, s.revokeGrant)))
}

func (s *Server) listGrants(w http.ResponseWriter, r *http.Request, c caller) error {
	q := r.URL.Query()
	f := store.GrantFilter{Tenant: c.principal.Tenant, Principal: q.Get("principal"), Server: q.Get("server"), Tool: q.Get("tool")}
	switch st := q.Get("state"); st {
	case "", "active":
		f.UsableAt = s.now()
	case "all":
	default:
		return invalid("state %q: want active or all", st)
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			return invalid("limit %q: want a number from 1 to %d", v, maxLimit)
		}
		f.Limit = n
	}
	cursor, err := listCursor(q)
	if err != nil {
		return err
	}
	f.Cursor = cursor
	f.IDPrefix = strings.ToLower(q.Get("id_prefix"))
	if !isIDText(f.IDPrefix) {
		return invalid("id_prefix %q: want at most %d hex digits and dashes", f.IDPrefix, idLen)
	}
	f.IDSuffix = strings.ToLower(q.Get("id_suffix"))
	if !isIDText(f.IDSuffix) {
		return invalid("id_suffix %q: want at most %d hex digits and dashes", f.IDSuffix, idLen)
	}
	out, err := s.ListGrants(r.Context(), Caller{Principal: c.principal, Roles: c.roles}, f)
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

func (s *Server) getGrant(w http.ResponseWriter, r *http.Request, c caller) error {
	g, err := s.lookupGrant(r, c)
	if err != nil {
		return err
	}
	us, err := s.grants.GrantUses(r.Context(), g.ID, recentUses)
	if err != nil {
		return fmt.Errorf("uses of grant %s: %w", g.ID, err)
	}
	out := fromGrant(g, s.now())
	for _, u := range us {
		out.RecentUses = append(out.RecentUses, GrantUse{N: u.N, At: utc(u.At), Principal: u.Principal, Session: u.Session, ArgumentsHash: u.ArgumentsHash})
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

func (s *Server) revokeGrant(w http.ResponseWriter, r *http.Request, c caller) error {
	g, err := s.lookupGrant(r, c)
	if err != nil {
		return err
	}
	var body RevokeBody
	if err := decodeBody(w, r, &body); err != nil {
		return err
	}
	got, err := s.RevokeGrant(r.Context(), Caller{Principal: c.principal, Roles: c.roles}, g.ID, body.Reason)
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, got)
	return nil
}

// lookupGrant reads the grant of the {id} path value, hiding other
// tenants' grants as not found.
func (s *Server) lookupGrant(r *http.Request, c caller) (grant.Grant, error) {
	raw := r.PathValue("id")
	id := strings.ToLower(raw)
	if !isUUID(id) {
		return grant.Grant{}, notFullID("grant", "/v1/grants", raw)
	}
	g, err := s.grants.GetGrant(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return grant.Grant{}, noGrant(id)
	}
	if err != nil {
		return grant.Grant{}, fmt.Errorf("get grant %s: %w", id, err)
	}
	if !grantVisible(c, g) {
		return grant.Grant{}, noGrant(id)
	}
	return g, nil
}

func noGrant(id string) *apiError {
	return &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Msg: fmt.Sprintf("no grant %q", id)}
}

// grantVisible reports whether c may see g: a principal with a tenant sees
// only its tenant's grants.
func grantVisible(c caller, g grant.Grant) bool {
	return c.principal.Tenant == "" || c.principal.Tenant == g.Tenant
}

// grantTerms checks the grant object of an approve body and returns its
// terms. The duration's limit (grants.max_ttl) is checked by the gate.
func grantTerms(b *GrantBody) (approval.GrantTerms, error) {
	if strings.TrimSpace(b.Duration) == "" {
		return approval.GrantTerms{}, invalid(`grant.duration is required (Go syntax, e.g. "1h" or "30m")`)
	}
	d, err := time.ParseDuration(b.Duration)
	if err != nil {
		return approval.GrantTerms{}, invalid("grant.duration %q: want a Go duration such as \"1h\" or \"30m\"", b.Duration)
	}
	if len(b.When) > maxPredicate {
		return approval.GrantTerms{}, invalid("grant.when longer than %d bytes", maxPredicate)
	}
	return approval.GrantTerms{When: b.When, TTL: d, MaxUses: b.MaxUses}, nil
}

// approveGranting is the approve route with a grant attached.
func (s *Server) approveGranting(w http.ResponseWriter, r *http.Request, c caller, id approval.ID, body ApproveBody) error {
	out, err := s.grantApprove(r.Context(), c, id, body.Reason, body.ArgumentsHash, body.Grant)
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// grantApprove is the one approve-with-a-grant path of the REST API and the
// web inbox: it checks the terms, approves id as c with them attached and
// returns the approval after it, with the grant when one was made.
func (s *Server) grantApprove(ctx context.Context, c caller, id approval.ID, reason, pinnedHash string, b *GrantBody) (Approval, error) {
	if s.grants == nil {
		return Approval{}, invalid("grants are not available on this server")
	}
	terms, err := grantTerms(b)
	if err != nil {
		return Approval{}, err
	}
	if len(reason) > maxReason {
		return Approval{}, invalid("reason longer than %d bytes", maxReason)
	}
	if _, err := s.lookup(ctx, c, id); err != nil {
		return Approval{}, err
	}
	got, made, err := s.grants.ApproveWithGrant(ctx, id, c.principal, reason, pinnedHash, terms)
	dup := errors.Is(err, approval.ErrDuplicate)
	if dup {
		err = nil
	}
	if err != nil {
		e := grantError(fmt.Errorf("approve %s with a grant: %w", id, err))
		if e.Status == http.StatusConflict && e.Code != CodeGrantNotEndorsed {
			s.describeConflict(ctx, id, e)
		}
		return Approval{}, e
	}
	out := fromRequest(got)
	out.Duplicate = dup
	s.heldAs(ctx, &out)
	if made != nil {
		g := fromGrant(*made, s.now())
		out.Grant = &g
	}
	return out, nil
}

// ApproveWithGrant approves id as c with grant terms b attached, through
// the same code as POST /v1/approvals/{id}/approve with a "grant" object
// (and `toolgate approvals approve --grant`), and returns the approval
// after it; its Grant is set when the grant was made (nil while a quorum
// still waits for other approvers' identical terms). pinnedHash, when not
// empty, must be the request's arguments hash. A duration longer than
// grants.max_ttl is a 422, never shortened. Errors carry their answer:
// see [PublicError].
func (s *Server) ApproveWithGrant(ctx context.Context, c Caller, id approval.ID, reason, pinnedHash string, b GrantBody) (Approval, error) {
	if !c.CanReview() {
		return Approval{}, forbidden(reviewRoles)
	}
	if pinnedHash != "" && !IsArgumentsHash(pinnedHash) {
		return Approval{}, invalid("arguments_hash %q: want %q and %d lower-case hex digits", pinnedHash, hashPrefix, hashHexchars)
	}
	return s.grantApprove(ctx, c.inner(), id, reason, pinnedHash, &b)
}

// ListGrants returns one page of the grants c may see (its tenant's, when
// it has one) matching f, as GET /v1/grants does. f.Tenant is set from c;
// a Limit above 1000 is lowered to it.
func (s *Server) ListGrants(ctx context.Context, c Caller, f store.GrantFilter) (GrantList, error) {
	if !c.CanRead() {
		return GrantList{}, forbidden(readRoles)
	}
	if s.grants == nil {
		return GrantList{}, invalid("grants are not available on this server")
	}
	f.Tenant = c.Principal.Tenant
	f.Limit = min(f.Limit, maxLimit)
	gs, next, err := s.grants.ListGrants(ctx, f)
	if err != nil {
		return GrantList{}, fmt.Errorf("list grants: %w", err)
	}
	out := GrantList{Grants: make([]Grant, 0, len(gs)), NextCursor: next}
	now := s.now()
	for _, g := range gs {
		if grantVisible(c.inner(), g) {
			out.Grants = append(out.Grants, fromGrant(g, now))
		}
	}
	return out, nil
}

// RevokeGrant revokes grant id as c, as POST /v1/grants/{id}/revoke does
// (approvers and admins; reason optional, at most maxReason bytes), and
// returns the grant after it; another tenant's grant is not found.
func (s *Server) RevokeGrant(ctx context.Context, c Caller, id, reason string) (Grant, error) {
	if !c.CanReview() {
		return Grant{}, forbidden(reviewRoles)
	}
	if s.grants == nil {
		return Grant{}, invalid("grants are not available on this server")
	}
	if len(reason) > maxReason {
		return Grant{}, invalid("reason longer than %d bytes", maxReason)
	}
	id = strings.ToLower(id)
	if !isUUID(id) {
		return Grant{}, noGrant(id)
	}
	g, err := s.grants.GetGrant(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !grantVisible(c.inner(), g)) {
		return Grant{}, noGrant(id)
	}
	if err != nil {
		return Grant{}, fmt.Errorf("get grant %s: %w", id, err)
	}
	got, err := s.grants.RevokeGrant(ctx, c.Principal, g.ID, reason)
	if err != nil {
		return Grant{}, grantError(fmt.Errorf("revoke grant %s: %w", g.ID, err))
	}
	return fromGrant(got, s.now()), nil
}

// grantError maps the errors of the grant routes; the rest goes through
// toAPIError.
func grantError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	e := &apiError{Err: err}
	switch {
	case errors.Is(err, grant.ErrInvalid), errors.Is(err, approval.ErrGrantKind):
		e.Status, e.Code, e.Msg = http.StatusUnprocessableEntity, CodeInvalid, publicGrantError(err)
	case errors.Is(err, grant.ErrNotEndorsed):
		e.Status, e.Code, e.Msg = http.StatusConflict, CodeGrantNotEndorsed, publicGrantError(err)
	case errors.Is(err, grant.ErrForbidden):
		e.Status, e.Code, e.Msg = http.StatusConflict, CodeGrantsForbidden, publicGrantError(err)
	case errors.Is(err, store.ErrNotFound):
		e.Status, e.Code, e.Msg = http.StatusNotFound, CodeNotFound, "no such grant or approval"
	case errors.Is(err, store.ErrInDoubt):
		e.Status, e.Code, e.Msg = http.StatusServiceUnavailable, CodeUnavailable, "the change may have been recorded: read the grant before retrying"
	default:
		return toAPIError(err)
	}
	return e
}

// publicGrantError is the text of a grant error without the operation
// prefixes ("approve <id> with a grant: "): from the sentinel's text on.
func publicGrantError(err error) string {
	msg := err.Error()
	for _, s := range []error{grant.ErrInvalid, grant.ErrNotEndorsed, grant.ErrForbidden, approval.ErrGrantKind} {
		if i := strings.Index(msg, s.Error()); i >= 0 {
			return strings.TrimPrefix(msg[i:], "grant: ")
		}
	}
	return msg
}

func fromGrant(g grant.Grant, now time.Time) Grant {
	out := Grant{
		ID: g.ID, State: string(g.State(now)), Principal: g.Principal, OnBehalfOf: g.OnBehalfOf, Tenant: g.Tenant,
		Server: g.Server, Tool: g.Tool, When: g.When, CreatedAt: utc(g.CreatedAt), ExpiresAt: utc(g.ExpiresAt),
		MaxUses: g.MaxUses, Uses: g.Uses, CreatedBy: g.CreatedBy, ApprovedBy: make([]GrantApprover, 0, len(g.ApprovedBy)),
		Approvals: g.Approvals, Reason: g.Reason, SourceApproval: string(g.SourceApproval), Rule: g.Rule,
		RevokedAt: utc(g.RevokedAt), RevokedBy: g.RevokedBy, RevokeReason: g.RevokeReason,
	}
	for _, a := range g.ApprovedBy {
		out.ApprovedBy = append(out.ApprovedBy, GrantApprover{ID: a.ID, Groups: nonNil(a.Groups)})
	}
	return out
}

func wireTerms(t *approval.GrantTerms) *GrantTerms {
	if t == nil {
		return nil
	}
	return &GrantTerms{Duration: t.TTL.String(), MaxUses: t.MaxUses, When: t.When}
}
