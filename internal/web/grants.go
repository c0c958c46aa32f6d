package web

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/store"
)

// grantsLimit is how many grants one /ui/grants page lists.
const grantsLimit = 200

// grantsView is the list of remembered grants (issue 12).
type grantsView struct {
	Rows      []grantRow
	Active    int
	More      string // cursor of the next page, or ""
	CanRevoke bool
}

// grantRow is one grant as /ui/grants shows it. Every text the agent or an
// approver chose (principal, predicate, reason) is made visible and then
// escaped by the template.
type grantRow struct {
	ID, ShortID    string
	State          string // active, expired, exhausted, revoked
	Active         bool
	Principal      string
	OnBehalfOf     string
	Tenant         string
	Server, Tool   string
	When           string // "" means any arguments
	AnyArguments   bool   // When is "" or always true (policy.GrantAdmitsAnyArguments)
	Uses           int64
	MaxUses        int64 // 0: no cap
	ExpiresAt      string
	Expires        string
	TimeLeft       string
	Urgent         bool
	Created        string
	CreatedBy      string
	ApprovedBy     string
	Reason         string
	SourceApproval string
	SourceShort    string
	Revoked        string // who and when, for a revoked grant
	RevokeReason   string
}

// newGrantRow builds the list view of g at now.
func (s *Server) newGrantRow(g api.Grant) grantRow {
	r := grantRow{
		ID: g.ID, ShortID: shortID(g.ID), State: g.State, Active: g.State == "active",
		Principal: visible(g.Principal), OnBehalfOf: visible(g.OnBehalfOf), Tenant: visible(g.Tenant),
		Server: visible(g.Server), Tool: visible(g.Tool), When: visible(g.When), AnyArguments: policy.GrantAdmitsAnyArguments(g.When),
		Uses: g.Uses, MaxUses: g.MaxUses, ExpiresAt: stamp(g.ExpiresAt), Expires: human(g.ExpiresAt),
		Created: human(g.CreatedAt), CreatedBy: visible(g.CreatedBy), Reason: visible(g.Reason),
		SourceApproval: g.SourceApproval, SourceShort: shortID(g.SourceApproval), RevokeReason: visible(g.RevokeReason),
	}
	if !isUUID(r.SourceApproval) {
		r.SourceApproval = ""
	}
	left := g.ExpiresAt.Sub(s.now())
	r.TimeLeft, r.Urgent = timeLeft(left), left < time.Minute
	by := make([]string, 0, len(g.ApprovedBy))
	for _, a := range g.ApprovedBy {
		by = append(by, visible(a.ID))
	}
	r.ApprovedBy = strings.Join(by, ", ")
	if !g.RevokedAt.IsZero() {
		r.Revoked = "by " + visible(g.RevokedBy) + " at " + human(g.RevokedAt)
	}
	return r
}

// grantStateOrder sorts active grants first, then the ones that may still
// matter to someone reading (exhausted, expired), revoked last.
var grantStateOrder = map[string]int{"active": 0, "exhausted": 1, "expired": 2, "revoked": 3}

// grants is GET /ui/grants: the grants the approver may see (its tenant's,
// when it has one), active first, newest first within a state.
func (s *Server) grants(w http.ResponseWriter, r *http.Request, c *session) {
	s.showGrants(w, r, c, http.StatusOK, grantsFlash(r.URL.Query().Get("done")), "")
}

func grantsFlash(done string) string {
	if done == "revoke" {
		return "The grant was revoked: the next matching call needs an approval again."
	}
	return ""
}

// showGrants renders the grants page with status, a flash and an error.
func (s *Server) showGrants(w http.ResponseWriter, r *http.Request, c *session, status int, flashMsg, errMsg string) {
	l, err := s.backend.ListGrants(r.Context(), c.caller, store.GrantFilter{Limit: grantsLimit, Cursor: pageCursor(r.URL.Query().Get("cursor"))})
	if err != nil {
		s.fail(w, r, c, err)
		return
	}
	v := &grantsView{More: l.NextCursor, CanRevoke: c.caller.CanReview()}
	for _, g := range l.Grants {
		row := s.newGrantRow(g)
		if row.Active {
			v.Active++
		}
		v.Rows = append(v.Rows, row)
	}
	slices.SortStableFunc(v.Rows, func(a, b grantRow) int {
		if o := cmp.Compare(grantStateOrder[a.State], grantStateOrder[b.State]); o != 0 {
			return o
		}
		return cmp.Compare(b.ID, a.ID) // UUIDv7: newest first
	})
	s.render(w, r, "grants", status, view{Title: "Grants", User: c.user(), CSRF: c.csrf, Since: c.since, Grants: v, Flash: flashMsg, Error: errMsg})
}

// revokeGrant is POST /ui/grants/{id}/revoke, through the admin API's
// revoke (approvers and admins; the reason is optional there and here).
// Success redirects to /ui/grants; an error re-renders it with the API's
// status and message.
func (s *Server) revokeGrant(w http.ResponseWriter, r *http.Request, c *session) {
	id := strings.ToLower(r.PathValue("id"))
	if !isUUID(id) {
		s.errorPage(w, r, c, http.StatusNotFound, "There is no such grant.")
		return
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if _, err := s.backend.RevokeGrant(r.Context(), c.caller, id, reason); err != nil {
		status, detail := api.PublicError(err)
		if status >= 500 {
			s.fail(w, r, c, err)
			return
		}
		s.showGrants(w, r, c, status, "", detail.Message)
		return
	}
	http.Redirect(w, r, "/ui/grants?done=revoke", http.StatusSeeOther)
}

// grantForm is what the approver typed into the "remember as a grant"
// part of the detail page; it is shown again after a refusal.
type grantForm struct {
	Open     bool
	Duration string
	MaxUses  string
	When     string
}

// readGrantForm reads the grant fields of an approve form.
func readGrantForm(r *http.Request) grantForm {
	f := grantForm{Duration: strings.TrimSpace(r.PostFormValue("grant_duration")),
		MaxUses: strings.TrimSpace(r.PostFormValue("grant_max_uses")), When: strings.TrimSpace(r.PostFormValue("grant_when"))}
	f.Open = f.Duration != "" || f.MaxUses != "" || f.When != ""
	return f
}

// approveWithGrant is the approve button "Approve and remember": the same
// approval, pinned to the shown hash, with grant terms attached, through
// the admin API's approve-with-grant (the code of `approvals approve
// --grant`). The API checks the terms: a duration over grants.max_ttl is
// its 422 message, never shortened here.
func (s *Server) approveWithGrant(w http.ResponseWriter, r *http.Request, c *session, id approval.ID, hash, reason string, f grantForm) {
	f.Open = true
	var maxUses int64
	if f.MaxUses != "" {
		n, err := strconv.ParseInt(f.MaxUses, 10, 64)
		if err != nil || n < 0 {
			s.showDetailForm(w, r, c, id, http.StatusUnprocessableEntity, "", fmt.Sprintf("Max uses %q: give a whole number (empty for no cap); nothing was recorded.", visible(f.MaxUses)), f)
			return
		}
		maxUses = n
	}
	got, err := s.backend.ApproveWithGrant(r.Context(), c.caller, id, reason, hash, api.GrantBody{Duration: f.Duration, MaxUses: maxUses, When: f.When})
	if err != nil {
		s.reviewFailed(w, r, c, id, err, f)
		return
	}
	done := "grant"
	switch {
	case got.Duplicate:
		done = againApprove // the earlier approval stands; these terms were not kept
	case got.Grant == nil:
		done = "grant-pending"
	case policy.GrantAdmitsAnyArguments(got.Grant.When):
		done = "grant-any" // no predicate, or one always true: say that it admits any arguments
	}
	http.Redirect(w, r, "/ui/approvals/"+string(id)+"?done="+done, http.StatusSeeOther) //nolint:gosec // G710: id is a checked UUID, done a constant
}
