package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// inboxLimit is how many pending approvals one inbox page lists.
const inboxLimit = 100

// inboxView is the list of pending approvals.
type inboxView struct {
	Rows      []row
	Eligible  int    // rows this approver may review
	More      string // cursor of the next page, or ""
	Cursor    string // this page's cursor
	CanReview bool
}

func (s *Server) inboxData(r *http.Request, c *session) (*inboxView, error) {
	cursor := pageCursor(r.URL.Query().Get("cursor"))
	// Each approval becomes its row as the store reads it: the page keeps
	// 100 rows (a summary cut at summaryLen each), never 100 approvals
	// with their arguments whole. The page is rendered once read, so an
	// error midway is an error page, never a short list.
	v := &inboxView{Cursor: cursor, CanReview: c.caller.CanReview()}
	now := s.now()
	next, err := s.backend.EachApproval(r.Context(), c.caller, store.Filter{State: approval.StatePending, Descending: true, Limit: inboxLimit, Cursor: cursor},
		func(a *api.Approval) error {
			rw := newRow(*a, c.caller, now)
			if rw.Eligible {
				v.Eligible++
			}
			v.Rows = append(v.Rows, rw)
			return nil
		})
	if err != nil {
		return nil, err
	}
	v.More = next
	return v, nil
}

// inbox is GET /ui/: the pending approvals, newest first.
func (s *Server) inbox(w http.ResponseWriter, r *http.Request, c *session) {
	v, err := s.inboxData(r, c)
	if err != nil {
		s.fail(w, r, c, err)
		return
	}
	s.render(w, r, "inbox", http.StatusOK, view{Title: "Inbox", User: c.user(), CSRF: c.csrf, Since: c.since, Inbox: v})
}

// inboxFragment is the inbox list alone, for the page's live refresh.
func (s *Server) inboxFragment(w http.ResponseWriter, r *http.Request, c *session) {
	v, err := s.inboxData(r, c)
	if err != nil {
		status, _ := api.PublicError(err)
		http.Error(w, http.StatusText(status), status)
		return
	}
	s.write(w, r, "inbox", "inbox-list", http.StatusOK, view{User: c.user(), CSRF: c.csrf, Since: c.since, Inbox: v})
}

// detailView is one approval in full.
type detailView struct {
	row
	Args       node
	ArgsOK     bool
	RawArgs    []segment // the display copy as text: too many values for a tree (RawNote says so), or it does not parse (never expected)
	RawNote    string
	Warnings   []string
	Policy     bool // a policy approval: Args is the proposed change
	Target     string
	Base       int64
	Mode       string
	HeldAsTask bool // a call made as an MCP task: it runs once approved, connected or not
	Tenant     string
	PolicyRev  string
	Approvers  []string
	Reviews    []reviewView
	Sessions   []sessionView
	Pending    bool
	Expired    bool // pending past its deadline (the sweeper is about to expire it)
	ReasonText string
	Consumed   string
	// HeldBy is the gateway instance that holds (or last held) the call,
	// HeldUntil when its claim runs out, HeldLive whether that is still
	// ahead (as `approvals show` prints them); empty when none held it.
	HeldBy    string
	HeldUntil string
	HeldLive  bool
	HeldEnded bool // the call has ended: its holder lets the claim lapse
	// CanGrant: the approve may remember a grant (a tool call, not a
	// policy approval); Grant is what the approver typed for it.
	CanGrant bool
	Grant    grantForm
	// PolicyMoved: pending, and the deployment policy in force here is
	// not the revision that asked for it (the call is checked against
	// the one in force when it runs: gate.consumeCheck).
	PolicyMoved bool
	// SessionHold: the request is a session's require_approval hold
	// (sessionRule), which a policy that allows the call does not lift.
	SessionHold bool
}

// sessionRule is gate.SessionRule, the rule of a session's
// require_approval hold (web does not import gate; a test checks them
// equal).
const sessionRule = "session require_approval"

type reviewView struct {
	By, Verdict, Reason, At string
}

type sessionView struct {
	ID, Principal, OnBehalfOf, CreatedBy, Created string
	Revoked                                       bool
}

func (s *Server) detailData(r *http.Request, c *session, id approval.ID) (*detailView, error) {
	a, err := s.backend.GetApproval(r.Context(), c.caller, id)
	if err != nil {
		return nil, err
	}
	now := s.now()
	d := &detailView{row: newRow(a, c.caller, now), Mode: visible(a.Mode), Tenant: visible(a.Tenant),
		Target: visible(a.Target), Base: a.BaseRevision, PolicyRev: visible(a.PolicyRevision),
		Pending: a.State == "pending", ReasonText: visible(a.Reason), Consumed: human(a.ConsumedAt),
		HeldAsTask: a.HeldAs == api.HeldAsTask}
	if a.HeldBy != "" {
		d.HeldBy = visible(a.HeldBy)
		switch a.State {
		case "denied", "expired", "cancelled", "invalidated":
			d.HeldEnded = true
		}
		d.HeldEnded = d.HeldEnded || a.DispatchOutcome != ""
		if !a.HeldUntil.IsZero() {
			d.HeldUntil, d.HeldLive = human(a.HeldUntil), a.HeldUntil.After(now)
		}
	}
	d.Expired = a.State == string(approval.StateExpired) || (d.Pending && !now.Before(a.ExpiresAt))
	d.Policy = a.Kind == approval.KindSessionPolicy || a.Kind == approval.KindPolicyChange
	if d.Pending && !d.Policy && a.PolicyRevision != "" {
		cur := s.backend.PolicyRevision()
		d.PolicyMoved = cur != "" && cur != a.PolicyRevision
		d.SessionHold = a.Rule == sessionRule
	}
	d.CanGrant = !d.Policy && !a.GrantsForbidden // the decision said grants: false
	switch n, err := parseTree(a.Arguments, maxTreeNodes); {
	case err == nil:
		d.Args, d.ArgsOK = n, true
	case errors.Is(err, errTreeTooLarge):
		// Every byte still shows, as text: markers and hidden characters
		// marked as in the tree, the rest as the copy has it.
		d.RawNote = fmt.Sprintf("These arguments have more than %d values: they are shown as their JSON text (%d bytes), whole, not as a tree.", maxTreeNodes, len(a.Arguments))
		d.RawArgs = textSegments(string(a.Arguments))
	default:
		d.RawArgs = textSegments(string(a.Arguments))
	}
	for _, w := range a.DisplayWarnings {
		d.Warnings = append(d.Warnings, visible(w))
	}
	for _, ap := range a.Approvers {
		if approval.IsRequester(ap, a.RequestedBy, a.OnBehalfOf) {
			ap += " (requested it: may not review)" // the proposer of a policy change is among its admins
		}
		d.Approvers = append(d.Approvers, visible(ap))
	}
	for _, rv := range a.Reviews {
		d.Reviews = append(d.Reviews, reviewView{By: visible(rv.By), Verdict: rv.Verdict, Reason: visible(rv.Reason), At: human(rv.At)})
	}
	links, err := s.backend.RequesterSessions(r.Context(), c.caller, a)
	if err != nil {
		s.log.WarnContext(r.Context(), "read requester sessions", "approval", id, "err", err)
	}
	for _, l := range links {
		d.Sessions = append(d.Sessions, sessionView{ID: l.ID, Principal: visible(l.Principal), OnBehalfOf: visible(l.OnBehalfOf),
			CreatedBy: visible(l.CreatedBy), Created: human(l.CreatedAt), Revoked: l.Revoked})
	}
	return d, nil
}

// detail is GET /ui/approvals/{id}. A short id (a unique prefix or suffix
// of at least 6 characters) redirects to the full one.
func (s *Server) detail(w http.ResponseWriter, r *http.Request, c *session) {
	raw := strings.ToLower(r.PathValue("id"))
	if !isUUID(raw) {
		s.resolveShort(w, r, c, raw)
		return
	}
	id := approval.ID(raw)
	d, err := s.detailData(r, c, id)
	if err != nil {
		s.fail(w, r, c, err)
		return
	}
	s.render(w, r, "detail", http.StatusOK, view{Title: d.Subject, User: c.user(), CSRF: c.csrf, Since: c.since, Detail: d, Flash: flash(r.URL.Query().Get("done"), d)})
}

// The done= values of a review that repeated the reviewer's earlier
// verdict (the API's duplicate answer): nothing was recorded.
const (
	againApprove = "again-approve"
	againDeny    = "again-deny"
)

// flash is the message after a review redirected back to the page showing
// d, the request as it is now.
func flash(done string, d *detailView) string {
	switch done {
	case againApprove, againDeny:
		verdict := "approved"
		if done == againDeny {
			verdict = "denied"
		}
		msg := "You had already " + verdict + " this request: your earlier review stands and nothing new was recorded (a new reason or grant terms are not kept). It is " + d.State
		if d.DecidedBy != "" {
			msg += ", decided by " + d.DecidedBy
		}
		return msg + "."
	case "approve":
		if d.State == string(approval.StateApproved) && !d.Policy {
			// The decision is recorded before the call is dispatched: the
			// dispatch re-check may still invalidate it (explain50).
			return fmt.Sprintf("Your approval was recorded; it is approved (%d of %d). The call %s: this page shows what became of it.", d.Approved, d.Required, runsWhen(d.Mode))
		}
		if d.State == string(approval.StateInvalidated) {
			// The call's re-check (in the approval's own transaction
			// when this process held it) refused it: say so, not
			// "approved".
			return "Your approval was recorded, but the call did not run: the re-check against the policy in force and its approval quorum invalidated the request (" + d.ReasonText + ")."
		}
		return "Your approval was recorded."
	case "deny":
		return "Your denial was recorded, with your reason."
	case denyWaiting:
		return "Your denial was recorded; the agent, still waiting on the call, gets your reason now."
	case denyTask:
		return "Your denial was recorded; the call was made as an MCP task: the agent gets your reason when it next asks about the task (tasks/get)."
	case denyResend:
		return "Your denial was recorded; nobody waits on the call now (retry mode, or the claim of the instance that held it ended): the agent gets your reason only if it re-sends the call."
	case "grant":
		return "Your approval was recorded and remembered as a grant: see Grants."
	case "grant-any":
		return "Your approval was recorded and remembered as a grant with no condition (or one always true): it admits any arguments to this tool from this caller until it expires or is revoked; see Grants."
	case "grant-pending":
		return "Your approval and its grant terms were recorded; the grant is made when enough approvers attach the same terms."
	}
	return ""
}

// showDetail renders approval id with status, a flash and an error.
func (s *Server) showDetail(w http.ResponseWriter, r *http.Request, c *session, id approval.ID, status int, flashMsg, errMsg string) {
	s.showDetailForm(w, r, c, id, status, flashMsg, errMsg, grantForm{})
}

// showDetailForm is showDetail with the grant fields filled from f.
func (s *Server) showDetailForm(w http.ResponseWriter, r *http.Request, c *session, id approval.ID, status int, flashMsg, errMsg string, f grantForm) {
	d, err := s.detailData(r, c, id)
	if err != nil {
		s.fail(w, r, c, err)
		return
	}
	d.Grant = f
	s.render(w, r, "detail", status, view{Title: d.Subject, User: c.user(), CSRF: c.csrf, Since: c.since, Detail: d, Flash: flashMsg, Error: errMsg})
}

// detailFragment is the detail's main part alone, for the live refresh.
func (s *Server) detailFragment(w http.ResponseWriter, r *http.Request, c *session) {
	raw := strings.ToLower(r.PathValue("id"))
	if !isUUID(raw) {
		http.NotFound(w, r)
		return
	}
	d, err := s.detailData(r, c, approval.ID(raw))
	if err != nil {
		status, _ := api.PublicError(err)
		http.Error(w, http.StatusText(status), status)
		return
	}
	s.write(w, r, "detail", "detail-main", http.StatusOK, view{User: c.user(), CSRF: c.csrf, Since: c.since, Detail: d})
}

// matchesView lists the approvals an ambiguous short id matches.
type matchesView struct {
	Query string
	Rows  []row
}

// resolveShort finds the approvals whose id starts or ends with q: one
// redirects to it, several are listed.
func (s *Server) resolveShort(w http.ResponseWriter, r *http.Request, c *session, q string) {
	if len(q) < minShortID || len(q) > 36 || !isIDText(q) {
		s.errorPage(w, r, c, http.StatusNotFound, fmt.Sprintf("No approval %q: give a full id, or at least %d of its first or last characters.", visible(q), minShortID))
		return
	}
	var found []api.Approval
	seen := map[string]bool{}
	for _, f := range []store.Filter{{IDPrefix: q, Limit: 10}, {IDSuffix: q, Limit: 10}} {
		l, err := s.backend.ListApprovals(r.Context(), c.caller, f)
		if err != nil {
			s.fail(w, r, c, err)
			return
		}
		for _, a := range l.Approvals {
			if !seen[a.ID] {
				seen[a.ID] = true
				found = append(found, a)
			}
		}
	}
	switch len(found) {
	case 0:
		s.errorPage(w, r, c, http.StatusNotFound, fmt.Sprintf("No approval id starts or ends with %q.", q))
	case 1:
		http.Redirect(w, r, "/ui/approvals/"+found[0].ID, http.StatusSeeOther)
	default:
		v := &matchesView{Query: q}
		for _, a := range found {
			v.Rows = append(v.Rows, newRow(a, c.caller, s.now()))
		}
		s.render(w, r, "matches", http.StatusMultipleChoices, view{Title: "Several approvals match", User: c.user(), CSRF: c.csrf, Since: c.since, Matches: v})
	}
}

// minShortID is the shortest short id accepted (DESIGN "CLI").
const minShortID = 6

// approve is POST /ui/approvals/{id}/approve: the approval pinned to the
// arguments hash the page showed.
func (s *Server) approve(w http.ResponseWriter, r *http.Request, c *session) {
	s.review(w, r, c, approval.VerdictApprove)
}

// deny is POST /ui/approvals/{id}/deny; a reason is required.
func (s *Server) deny(w http.ResponseWriter, r *http.Request, c *session) {
	s.review(w, r, c, approval.VerdictDeny)
}

// review records c's verdict through the admin API's review code. On
// success it redirects to the detail page (so a reload does not post
// again); an error re-renders the page with the API's status (409 when the
// request changed since the page showed it) and what the API said.
func (s *Server) review(w http.ResponseWriter, r *http.Request, c *session, v approval.Verdict) {
	raw := strings.ToLower(r.PathValue("id"))
	if !isUUID(raw) {
		s.errorPage(w, r, c, http.StatusNotFound, "There is no such approval.")
		return
	}
	id := approval.ID(raw)
	hash := r.PostFormValue("arguments_hash")
	if hash == "" {
		// The page always posts the hash it showed: without it the
		// approver would decide arguments they did not see.
		s.showDetail(w, r, c, id, http.StatusUnprocessableEntity, "", "The form did not say which arguments you reviewed; nothing was recorded. Review the arguments below again.")
		return
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	gf := readGrantForm(r)
	if v == approval.VerdictApprove && r.PostFormValue("grant") == "1" {
		s.approveWithGrant(w, r, c, id, hash, reason, gf)
		return
	}
	if v == approval.VerdictApprove && gf.Open {
		// Enter in a grant field submits with the plain Approve button:
		// do not drop the terms the approver typed without saying so.
		s.showDetailForm(w, r, c, id, http.StatusUnprocessableEntity, "",
			"You filled in grant terms but pressed Approve; nothing was recorded. Press \"Approve and remember\" to make the grant, or clear its fields to approve only this call.", gf)
		return
	}
	got, err := s.backend.Review(r.Context(), c.caller, id, v, reason, hash)
	if err != nil {
		s.reviewFailed(w, r, c, id, err, gf)
		return
	}
	done := string(v)
	switch {
	case got.Duplicate && v == approval.VerdictDeny:
		done = againDeny
	case got.Duplicate:
		done = againApprove
	case v == approval.VerdictDeny:
		done = deniedTo(got, s.now())
	}
	http.Redirect(w, r, "/ui/approvals/"+string(id)+"?done="+done, http.StatusSeeOther) //nolint:gosec // G710: id is a checked UUID, done a constant
}

// The done= values of a denial, by when the agent gets its reason
// (deniedTo): the flash says which.
const (
	denyWaiting = "deny-waiting"
	denyTask    = "deny-task"
	denyResend  = "deny-resend"
)

// deniedTo says when the agent gets the reason of a denial, from the
// review's answer a (read in the review's own transaction, before the
// call's holder could learn of it and let its claim go): a done= value for
// flash. A call made as an MCP task answers the agent's next tasks/get
// (the gateway serves no tasks/result); a held call whose holder's claim
// is still ahead of now answers its waiting caller now; a retry-mode call,
// or a held call whose claim ended (its holder died or its caller went
// away), answers only an identical re-send. A policy request, or an answer
// whose state is not denied, gets "deny": nothing said about an agent.
func deniedTo(a api.Approval, now time.Time) string {
	switch {
	case a.State != string(approval.StateDenied) || (a.Kind != "" && a.Kind != approval.KindToolCall && a.Kind != approval.KindResourceRead && a.Kind != approval.KindPromptGet):
		return string(approval.VerdictDeny)
	case a.HeldAs == api.HeldAsTask:
		return denyTask
	case a.Mode == "hold" && a.HeldBy != "" && a.HeldUntil.After(now):
		return denyWaiting
	}
	return denyResend
}

// reviewFailed answers a refused review: a server error is an error page;
// anything else re-renders the detail with the API's status and message
// (a hash mismatch explained), keeping the grant fields f.
func (s *Server) reviewFailed(w http.ResponseWriter, r *http.Request, c *session, id approval.ID, err error, f grantForm) {
	status, detail := api.PublicError(err)
	if status >= 500 {
		s.fail(w, r, c, err)
		return
	}
	// A refused review is no state change, so no event (DESIGN: events are
	// written with a state change): the log says who tried, as the admin
	// API's "admin request failed" line does (newuser50, grants50).
	s.logRefusedReview(r, c, id, status, detail.Code)
	msg := detail.Message
	if detail.Code == api.CodeHashMismatch {
		msg = "The request changed since this page showed it (" + detail.Message + "); nothing was recorded. Review it again below."
	}
	s.showDetailForm(w, r, c, id, status, "", msg, f)
}

// logRefusedReview logs a review of approval id that the API refused
// (a 4xx status with its code) with who tried: Warn for 403 (self_review,
// not_eligible, a role that may not review), Info otherwise. No
// arguments are logged.
func (s *Server) logRefusedReview(r *http.Request, c *session, id approval.ID, status int, code string) {
	level := slog.LevelInfo
	if status == http.StatusForbidden {
		level = slog.LevelWarn
	}
	s.log.Log(r.Context(), level, "inbox review refused", "approval", id, "principal", c.caller.Principal.ID, "status", status, "code", code)
}

// bulkView is the answer of a bulk approval.
type bulkView struct {
	Approved []bulkItem
	Skipped  []bulkItem
}

type bulkItem struct {
	ID, ShortID, Subject, State, Why string
}

// maxBulk bounds one bulk approval.
const maxBulk = 100

// bulkApprove is POST /ui/approve: approve exactly the selected approvals,
// each field "approve" holding "<id> <arguments hash>" as the inbox showed
// them. Each goes through the same review as a single approval; the
// answer lists what was approved and what was skipped, with why.
func (s *Server) bulkApprove(w http.ResponseWriter, r *http.Request, c *session) {
	picked := r.PostForm["approve"]
	if len(picked) == 0 {
		s.errorPage(w, r, c, http.StatusUnprocessableEntity, "Select at least one request to approve.")
		return
	}
	if len(picked) > maxBulk {
		s.errorPage(w, r, c, http.StatusUnprocessableEntity, fmt.Sprintf("Select at most %d requests at once.", maxBulk))
		return
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	v := &bulkView{}
	seen := map[string]bool{}
	for _, p := range picked {
		idText, hash, _ := strings.Cut(strings.TrimSpace(p), " ")
		idText = strings.ToLower(idText)
		if !isUUID(idText) || seen[idText] {
			if !seen[idText] {
				v.Skipped = append(v.Skipped, bulkItem{ID: visible(idText), ShortID: visible(shortID(idText)), Why: "not an approval id"})
			}
			continue
		}
		seen[idText] = true
		item := bulkItem{ID: idText, ShortID: shortID(idText)}
		if hash == "" {
			item.Why = "the form did not say which arguments you reviewed"
			v.Skipped = append(v.Skipped, item)
			continue
		}
		cur, gerr := s.backend.GetApproval(r.Context(), c.caller, approval.ID(idText))
		if gerr != nil {
			// Whether the list showed its arguments whole cannot be
			// checked: nothing is approved on it (fail closed; the
			// review below does not read the request first).
			status, detail := api.PublicError(gerr)
			if status >= 500 {
				s.log.ErrorContext(r.Context(), "bulk approve: cannot read the approval; skipped", "approval", idText, "err", gerr)
			}
			item.Why = detail.Message + "; nothing was approved"
			v.Skipped = append(v.Skipped, item)
			continue
		}
		if _, whole := summarizeWhole(cur.Arguments, summaryLen); !whole {
			// The list showed its arguments in part (no checkbox
			// there); a form naming it is an older page or crafted.
			_, item.Subject = subject(cur)
			item.State = cur.State
			item.Why = "the list shows its arguments only in part: approve it on its own page, where they are shown whole"
			v.Skipped = append(v.Skipped, item)
			continue
		}
		a, err := s.backend.Review(r.Context(), c.caller, approval.ID(idText), approval.VerdictApprove, reason, hash)
		if err != nil {
			status, detail := api.PublicError(err)
			if status >= 500 {
				s.log.ErrorContext(r.Context(), "bulk approve", "approval", idText, "err", err)
			} else {
				s.logRefusedReview(r, c, approval.ID(idText), status, detail.Code)
			}
			item.Why = detail.Message
			if cur, gerr := s.backend.GetApproval(r.Context(), c.caller, approval.ID(idText)); gerr == nil {
				_, item.Subject = subject(cur)
				item.State = cur.State
			}
			v.Skipped = append(v.Skipped, item)
			continue
		}
		_, item.Subject = subject(a)
		item.State = a.State
		if a.State == string(approval.StateInvalidated) {
			// Recorded, but the approval's own consume of the held
			// call invalidated it: nothing ran.
			item.Why = "the call did not run: " + outcome(a)
		}
		v.Approved = append(v.Approved, item)
	}
	status := http.StatusOK
	if len(v.Approved) == 0 {
		status = http.StatusConflict
	}
	s.render(w, r, "bulk", status, view{Title: "Bulk approval", User: c.user(), CSRF: c.csrf, Since: c.since, Bulk: v})
}

// historyView is the list of decided approvals with its filters.
type historyView struct {
	Rows   []row
	States []string
	F      historyFilter
	More   string // the next page's query string, or ""
}

// historyFilter is the history's query, as the form shows it.
type historyFilter struct {
	State, Server, Tool, Requester, From, To, Cursor string
}

// timeLayout is the format of the history's time filters (datetime-local,
// read as UTC).
const timeLayout = "2006-01-02T15:04"

// history is GET /ui/history: decided approvals, newest first, filtered
// by state, server, tool, requester and creation time (UTC).
func (s *Server) history(w http.ResponseWriter, r *http.Request, c *session) {
	q := r.URL.Query()
	hf := historyFilter{State: q.Get("state"), Server: strings.TrimSpace(q.Get("server")), Tool: strings.TrimSpace(q.Get("tool")),
		Requester: strings.TrimSpace(q.Get("requester")), From: q.Get("from"), To: q.Get("to"), Cursor: q.Get("cursor")}
	v := &historyView{F: hf, States: []string{"approved", "consumed", "denied", "expired", "cancelled", "invalidated"}}
	f := store.Filter{Descending: true, Limit: 50, Decided: true, Server: hf.Server, Tool: hf.Tool, RequestedBy: hf.Requester}
	var problems []string
	switch {
	case hf.State == "" || hf.State == "all":
		hf.State = ""
	case slices.Contains(v.States, hf.State):
		f.State = approval.State(hf.State)
	default:
		problems = append(problems, fmt.Sprintf("unknown state %q", visible(hf.State)))
	}
	for _, tf := range []struct {
		text string
		dst  *time.Time
		name string
	}{{hf.From, &f.CreatedFrom, "from"}, {hf.To, &f.CreatedBefore, "to"}} {
		if tf.text == "" {
			continue
		}
		t, err := time.Parse(timeLayout, tf.text)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s %q: want YYYY-MM-DDTHH:MM (UTC)", tf.name, visible(tf.text)))
			continue
		}
		*tf.dst = t.UTC()
	}
	f.Cursor = pageCursor(hf.Cursor)
	if len(problems) > 0 {
		s.render(w, r, "history", http.StatusUnprocessableEntity, view{Title: "History", User: c.user(), CSRF: c.csrf, Since: c.since, History: v,
			Error: "Check the filters: " + strings.Join(problems, "; ") + "."})
		return
	}
	now := s.now()
	nextCursor, err := s.backend.EachApproval(r.Context(), c.caller, f, func(a *api.Approval) error {
		v.Rows = append(v.Rows, newRow(*a, c.caller, now))
		return nil
	})
	if err != nil {
		v.Rows = nil
		s.fail(w, r, c, err)
		return
	}
	if nextCursor != "" {
		next := url.Values{}
		for k, val := range map[string]string{"state": hf.State, "server": hf.Server, "tool": hf.Tool, "requester": hf.Requester,
			"from": hf.From, "to": hf.To, "cursor": nextCursor} {
			if val != "" {
				next.Set(k, val)
			}
		}
		v.More = next.Encode()
	}
	s.render(w, r, "history", http.StatusOK, view{Title: "History", User: c.user(), CSRF: c.csrf, Since: c.since, History: v})
}

// events is GET /ui/events: the admin API's event stream for the signed-in
// approver (the page's EventSource), filtered the same way.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	c, err := s.current(r)
	if errors.Is(err, errSignedOut) {
		http.Error(w, "signed out", http.StatusUnauthorized)
		return
	}
	if err != nil {
		http.Error(w, "the approval store is unavailable", http.StatusServiceUnavailable)
		return
	}
	if err := s.backend.ServeEventStream(w, r, c.caller); err != nil {
		status, detail := api.PublicError(err)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: detail})
	}
}

// pageCursor returns raw when it is a cursor a list returned
// (store.ParseListCursor), else "": the first page.
func pageCursor(raw string) string {
	if _, err := store.ParseListCursor(raw); err != nil {
		return ""
	}
	return raw
}

// isUUID reports whether s is lower-case 8-4-4-4-12 hex.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return false
			}
		} else if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// isIDText reports whether s could be part of an approval id: lower-case
// hex digits and dashes, at most 36 characters.
func isIDText(s string) bool {
	return len(s) <= 36 && strings.Trim(s, "0123456789abcdef-") == ""
}
