package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
)

// A Caller is an authenticated principal and its roles. The REST routes
// build one from the bearer token of each request; the web inbox
// (internal/web) builds one from its session cookie and then uses the
// exported methods below, which apply the same role, tenant and review
// rules as the routes: there is no second decision path.
type Caller struct {
	Principal approval.Principal
	Roles     []string
}

func (c Caller) inner() caller { return caller{principal: c.Principal, roles: c.Roles} }

// hasRole reports whether c has one of roles.
func (c Caller) hasRole(roles []string) bool {
	return slices.ContainsFunc(c.Roles, func(r string) bool { return slices.Contains(roles, r) })
}

// CanRead reports whether c may read approvals and events (viewer,
// approver or admin).
func (c Caller) CanRead() bool { return c.hasRole(readRoles) }

// CanReview reports whether c's roles allow reviewing at all (approver or
// admin); whether c may review a given request is [Caller.Eligible].
func (c Caller) CanReview() bool { return c.hasRole(reviewRoles) }

// ErrNoReviewRole is what [Caller.Eligible] returns for a caller whose
// roles do not review (a viewer).
var ErrNoReviewRole = errors.New("api: this role does not review")

// Eligible says whether c could review a, leaving aside its state and
// deadline: nil, or ErrNoReviewRole, approval.ErrSelfReview,
// approval.ErrNotEligible or approval.ErrDuplicate (c already reviewed it).
// These are the rules [Approvals.Review] applies (approval.Request.Eligible).
func (c Caller) Eligible(a Approval) error {
	if !c.CanReview() {
		return ErrNoReviewRole
	}
	r := approval.Request{RequestedBy: a.RequestedBy, OnBehalfOf: a.OnBehalfOf, Approvers: a.Approvers}
	for _, rv := range a.Reviews {
		r.Reviews = append(r.Reviews, approval.Review{By: rv.By, Verdict: approval.Verdict(rv.Verdict)})
	}
	return r.Eligible(approval.Reviewer{ID: c.Principal.ID, Groups: c.Principal.Groups})
}

// forbidden is the error of a caller without any of roles.
func forbidden(roles []string) *apiError {
	return &apiError{Status: http.StatusForbidden, Code: CodeForbidden, Msg: needsRoles(roles)}
}

// needsRoles says which roles a route needs: "this needs the role admin",
// or "this needs one of the roles viewer, approver, admin".
func needsRoles(roles []string) string {
	if len(roles) == 1 {
		return "this needs the role " + roles[0]
	}
	return "this needs one of the roles " + strings.Join(roles, ", ")
}

// ListApprovals returns one page of the approvals c may see (its tenant's,
// when it has one) matching f, as GET /v1/approvals does. f.Tenant is set
// from c; a Limit above 1000 is lowered to it.
func (s *Server) ListApprovals(ctx context.Context, c Caller, f store.Filter) (List, error) {
	if !c.CanRead() {
		return List{}, forbidden(readRoles)
	}
	f.Tenant = c.Principal.Tenant
	f.Limit = min(f.Limit, maxLimit)
	rs, next, err := s.approvals.List(ctx, f)
	if err != nil {
		return List{}, fmt.Errorf("list approvals: %w", err)
	}
	out := List{Approvals: make([]Approval, 0, len(rs)), NextCursor: next}
	for _, a := range rs {
		if visible(c.inner(), a) {
			out.Approvals = append(out.Approvals, fromRequest(a))
		}
	}
	return out, nil
}

// GetApproval returns approval id as c may see it; another tenant's is
// not found.
func (s *Server) GetApproval(ctx context.Context, c Caller, id approval.ID) (Approval, error) {
	if !c.CanRead() {
		return Approval{}, forbidden(readRoles)
	}
	a, err := s.lookup(ctx, c.inner(), id)
	if err != nil {
		return Approval{}, err
	}
	out := fromRequest(a)
	s.heldAs(ctx, &out)
	return out, nil
}

// Review records c's verdict on id through the same code as POST
// /v1/approvals/{id}/approve and /deny, and returns the approval after it.
// pinnedHash, when not empty, must be the request's arguments hash (else a
// 409 hash_mismatch, for either verdict). A deny needs a reason. Errors
// carry their answer: see [PublicError].
func (s *Server) Review(ctx context.Context, c Caller, id approval.ID, v approval.Verdict, reason, pinnedHash string) (Approval, error) {
	if !c.CanReview() {
		return Approval{}, forbidden(reviewRoles)
	}
	if v == approval.VerdictDeny && isBlank(reason) {
		return Approval{}, invalid(`a deny needs a "reason": the agent reads it`)
	}
	if pinnedHash != "" && !IsArgumentsHash(pinnedHash) {
		return Approval{}, invalid("arguments_hash %q: want %q and %d lower-case hex digits", pinnedHash, hashPrefix, hashHexchars)
	}
	got, dup, err := s.decide(ctx, c.inner(), id, v, reason, pinnedHash)
	if err != nil {
		return Approval{}, err
	}
	out := fromRequest(got)
	out.Duplicate = dup
	s.heldAs(ctx, &out)
	return out, nil
}

// PolicyRevision returns the revision of the deployment policy in force,
// as an approval's policy_revision records the one that asked for it, when
// the Approvals served tell it (*gate.Gate does); "" otherwise. It needs
// no role: it names no rule.
func (s *Server) PolicyRevision() string {
	if r, ok := s.approvals.(interface{ PolicyRevision() string }); ok {
		return r.PolicyRevision()
	}
	return ""
}

// PublicError returns the HTTP status and the public code and message of an
// error from the methods above, as the REST API would answer it; the cause
// itself is never in the message.
func PublicError(err error) (status int, detail ErrorDetail) {
	e := toAPIError(err)
	return e.Status, ErrorDetail{Code: e.Code, Message: e.Msg}
}

// isBlank reports whether s has nothing but white space.
func isBlank(s string) bool { return strings.TrimSpace(s) == "" }

// SessionLink is one agent session of a requester chain ([Server.RequesterSessions]).
type SessionLink struct {
	ID         string
	Principal  string
	OnBehalfOf string
	// CreatedBy is who created the session: a host, or the parent session's
	// principal.
	CreatedBy string
	CreatedAt time.Time
	Revoked   bool
}

// RequesterSessions returns the session chain behind a's requester when an
// agent session requested it (requested_by "session:<id>"): that session
// first, then its parents, its root last. It is nil for other requesters
// and when the server serves no sessions.
func (s *Server) RequesterSessions(ctx context.Context, c Caller, a Approval) ([]SessionLink, error) {
	if !c.CanRead() {
		return nil, forbidden(readRoles)
	}
	id, ok := strings.CutPrefix(a.RequestedBy, "session:")
	if !ok || s.sessions == nil || id == "" {
		return nil, nil
	}
	ch, err := s.sessions.SessionChain(ctx, session.ID(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read session chain of %s: %w", id, err)
	}
	links := make([]SessionLink, 0, len(ch))
	for _, ss := range ch {
		if c.Principal.Tenant != "" && ss.Tenant != c.Principal.Tenant {
			return nil, nil
		}
		links = append(links, SessionLink{ID: string(ss.ID), Principal: ss.Principal, OnBehalfOf: ss.OnBehalfOf,
			CreatedBy: ss.CreatedBy, CreatedAt: utc(ss.CreatedAt), Revoked: !ss.RevokedAt.IsZero()})
	}
	return links, nil
}
