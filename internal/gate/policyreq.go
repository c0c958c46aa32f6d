package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/session"
	"toolgate/internal/store"
)

// Statuses of a session policy request (PolicyResult.Status), as the API
// and the built-in MCP tool answer them.
const (
	// PolicyApplied: the change applied (at once because it only narrows,
	// or through an approval); the session's revision is the new one.
	PolicyApplied = "applied"
	// PolicyApprovalRequired: the change widens; nothing applied. An
	// approval of kind session_policy is pending; the identical request
	// applies once it is approved.
	PolicyApprovalRequired = "approval_required"
	// PolicyDenied: an approver denied the identical request; this answer
	// is given once, after which a new request may be made.
	PolicyDenied = "denied"
)

// PolicyRule is the rule name recorded on session policy approvals.
const PolicyRule = "session policy request"

// Reasons recorded on session policy approvals that can no longer apply.
const (
	// ReasonPolicyRevision: the session's revision moved since the request.
	ReasonPolicyRevision = "the session's policy changed since the request was made"
)

var (
	// ErrTooManyPolicyRequests refuses a widening request when the session
	// already has MaxPolicyRequests pending policy requests.
	ErrTooManyPolicyRequests = errors.New("gate: too many pending policy requests for this session")
	// ErrNotOwnSession refuses a policy request for another session: a
	// session may only ask to change itself.
	ErrNotOwnSession = errors.New("gate: a session may only request changes of its own policy")
	// ErrPolicyChanged means an approved request was consumed but the
	// session's revision moved before it could apply: nothing applied.
	ErrPolicyChanged = errors.New("gate: the session's policy changed before the approved change could apply; nothing was applied, make a new request")
)

// PolicyResult is the outcome of RequestSessionPolicy.
type PolicyResult struct {
	// Status is PolicyApplied, PolicyApprovalRequired or PolicyDenied.
	Status string
	// Session is the session after the call (its Revision is current).
	Session session.Session
	// Changed is true when an applied change wrote something.
	Changed bool
	// Approval is the session_policy request for PolicyApprovalRequired
	// and PolicyDenied, and the consumed one when an approval applied.
	Approval approval.Request
	// Widens names the parts of the change that widen (empty when it only
	// narrows).
	Widens []string
}

// policyRequestTimeout is Options.PolicyRequestTimeout or its default.
func (g *Gate) policyRequestTimeout() time.Duration {
	if g.opts.PolicyRequestTimeout > 0 {
		return g.opts.PolicyRequestTimeout
	}
	return 300 * time.Second
}

func (g *Gate) maxPolicyRequests() int {
	if g.opts.MaxPolicyRequests > 0 {
		return g.opts.MaxPolicyRequests
	}
	return 32
}

// toolExists reports whether the deployment exposes tool of server now
// (Options.Catalog); without a catalog every tool counts as exposed.
func (g *Gate) toolExists(server, tool string) bool {
	if g.opts.Catalog == nil {
		return true
	}
	_, ok := g.opts.Catalog.ToolDigest(server, tool)
	return ok
}

// RequestSessionPolicy handles session id's request to change its own
// policy (issue 6, "Session policy requests"); actor must be that
// session's principal (else ErrNotOwnSession).
//
//   - A change past the ceiling (session.Chain.Classify) returns an error
//     wrapping session.ErrCeiling and applies nothing, whatever was
//     approved.
//   - A change that only narrows applies at once (PolicyApplied; the
//     revision grows by one when anything changed), and the session's
//     open policy requests made against an older revision are cancelled
//     or invalidated.
//   - A change that widens anything applies nothing. If an approved,
//     identical request (same session principal and digest of the
//     normalized change) made against the current revision exists, it is
//     consumed (a compare-and-set: only one caller can) and the change
//     applies if the revision is still the base revision (else
//     ErrPolicyChanged); this happens once. An unanswered denial of an
//     identical request is answered once (PolicyDenied). A pending
//     identical request is returned as it is (PolicyApprovalRequired).
//     Otherwise a new approval of kind session_policy is created
//     (PolicyApprovalRequired), unless MaxPolicyRequests are pending
//     (ErrTooManyPolicyRequests).
//
// Other errors: session.ErrEmptyChange, session.ErrBadRef,
// session.ErrRevoked, store.ErrNotFound, and store failures as an
// *Incident (its text is public; the cause was logged under its id).
func (g *Gate) RequestSessionPolicy(ctx context.Context, actor approval.Principal, id session.ID, ch session.Change) (_ PolicyResult, err error) {
	defer func() {
		if err != nil && !isPublicError(err) {
			err = g.incident(ctx, "session policy request failed", err, "session", id)
		}
	}()
	if actor.SessionID == "" || session.ID(actor.SessionID) != id {
		return PolicyResult{}, ErrNotOwnSession
	}
	// A concurrent identical request may apply the change, or a policy
	// change commit, between this request's reads and its write: then it
	// looks again (the change may now apply at once, or need a request
	// against the new revision), a few times.
	for attempt := 0; ; attempt++ {
		res, err := g.requestSessionPolicy(ctx, actor, id, ch)
		if !errors.Is(err, errPolicyMoved) {
			return res, err
		}
		if attempt == 2 {
			return PolicyResult{}, fmt.Errorf("%w: the session's policy kept changing while the request was handled; make the request again", session.ErrStaleRevision)
		}
	}
}

// errPolicyMoved makes RequestSessionPolicy look again: the session's
// revision moved, or an identical request was applied concurrently.
var errPolicyMoved = errors.New("gate: the session's policy moved while the request was handled")

func (g *Gate) requestSessionPolicy(ctx context.Context, actor approval.Principal, id session.ID, ch session.Change) (PolicyResult, error) {
	chain, err := g.store.Chain(ctx, id)
	if err != nil {
		return PolicyResult{}, err
	}
	if chain.Revoked() {
		return PolicyResult{}, fmt.Errorf("session %s: %w", id, session.ErrRevoked)
	}
	norm, widens, err := chain.Classify(ch, g.serverExists, g.toolExists)
	if err != nil {
		return PolicyResult{}, err
	}
	if len(widens) == 0 {
		return g.applyNarrowing(ctx, actor, chain, norm)
	}
	display, err := json.Marshal(norm)
	if err != nil {
		return PolicyResult{}, fmt.Errorf("encode policy change: %w", err)
	}
	hash, err := approval.Hash(display)
	if err != nil {
		return PolicyResult{}, fmt.Errorf("hash policy change: %w", err)
	}
	cur := chain[0]
	res, ok, err := g.useIdentical(ctx, actor, cur, norm, hash)
	if err != nil || ok {
		res.Widens = widens
		return res, err
	}
	r, err := g.newPolicyRequest(ctx, actor, cur, display, hash, widens)
	if err != nil {
		return PolicyResult{}, err
	}
	return PolicyResult{Status: PolicyApprovalRequired, Session: cur, Approval: r, Widens: widens}, nil
}

// applyNarrowing writes a change that only narrows, if the session is still
// at the revision it was classified against (else the caller's change is
// classified again, a few times).
func (g *Gate) applyNarrowing(ctx context.Context, actor approval.Principal, chain session.Chain, norm session.Change) (PolicyResult, error) {
	for attempt := 0; ; attempt++ {
		base := chain[0].Revision
		s, changed, err := g.store.UpdateSessionWithChain(ctx, chain[0].ID, actor.ID, g.now(), func(s *session.Session, ancestors session.Chain) error {
			if s.Revision != base {
				return fmt.Errorf("%w: revision is %d, classified at %d", session.ErrStaleRevision, s.Revision, base)
			}
			if err := g.checkCeiling(s, ancestors, norm); err != nil {
				return err
			}
			norm.Apply(s)
			return nil
		})
		if errors.Is(err, session.ErrStaleRevision) && attempt < 3 {
			if chain, err = g.store.Chain(ctx, chain[0].ID); err != nil {
				return PolicyResult{}, err
			}
			var widens []string
			if norm, widens, err = chain.Classify(norm, g.serverExists, g.toolExists); err != nil {
				return PolicyResult{}, err
			}
			if len(widens) > 0 {
				return PolicyResult{}, fmt.Errorf("%w: the session changed meanwhile and the change now widens it; make the request again", session.ErrStaleRevision)
			}
			continue
		}
		if err != nil {
			return PolicyResult{}, err
		}
		if changed {
			g.log.InfoContext(ctx, "session policy narrowed by its own request", "session", s.ID, "revision", s.Revision)
			g.voidStalePolicyRequests(ctx, s)
		}
		return PolicyResult{Status: PolicyApplied, Session: s, Changed: changed}, nil
	}
}

// checkCeiling checks norm against s's parent chain ancestors as they are
// inside the write's transaction (UpdateSessionWithChain holds their
// rows): a change of an ancestor that committed after the request read
// the chain may have lowered the ceiling (session.ErrCeiling). What the
// change widens is not looked at again: s's revision is checked by the
// caller.
func (g *Gate) checkCeiling(s *session.Session, ancestors session.Chain, norm session.Change) error {
	if len(ancestors) == 0 {
		return nil
	}
	_, _, err := append(session.Chain{*s}, ancestors...).Classify(norm, g.serverExists, nil)
	return err
}

// useIdentical looks for an open request identical to this one. ok is
// false when there is none to use and a new request must be made.
func (g *Gate) useIdentical(ctx context.Context, actor approval.Principal, cur session.Session, norm session.Change, hash string) (PolicyResult, bool, error) {
	open, err := g.store.OpenIdentical(ctx, actor.ID, "", "", hash)
	if err != nil {
		return PolicyResult{}, false, fmt.Errorf("find identical policy requests: %w", err)
	}
	for _, r := range open {
		if r.Kind != approval.KindSessionPolicy || r.Target != string(cur.ID) {
			continue
		}
		if r.BaseRevision != cur.Revision && r.State != approval.StateDenied {
			g.voidPolicyRequest(ctx, r.ID)
			continue
		}
		switch r.State {
		case approval.StatePending:
			if !g.now().Before(r.ExpiresAt) {
				continue // the sweeper expires it
			}
			return PolicyResult{Status: PolicyApprovalRequired, Session: cur, Approval: r}, true, nil
		case approval.StateDenied:
			got, err := g.store.UpdateRequest(ctx, r.ID, "toolgate", func(r *approval.Request) error { return r.Answer(g.now()) })
			if err != nil {
				continue // answered by a concurrent identical request
			}
			return PolicyResult{Status: PolicyDenied, Session: cur, Approval: got}, true, nil
		case approval.StateApproved:
			res, ok, err := g.applyApproved(ctx, actor, cur, r, norm)
			if err != nil || ok {
				return res, true, err
			}
		}
	}
	return PolicyResult{}, false, nil
}

// applyApproved consumes the approved request r and applies norm. Consuming
// is the compare-and-set that makes the change apply at most once: of two
// concurrent identical retries one consumes r, the other gets ok false
// (and makes a new request). The session write then checks that the
// revision is still r.BaseRevision.
//
// The consume writes a consume token of this request's own
// (approval.Request.ConsumeToken): when the consume answers an error
// although it committed (its COMMIT's reply lost), the request read back
// consumed with that token is this request's, and the change applies
// (before, the approved change was dropped and a new approval asked for).
func (g *Gate) applyApproved(ctx context.Context, actor approval.Principal, cur session.Session, r approval.Request, norm session.Change) (PolicyResult, bool, error) {
	token := newConsumeToken()
	consumed, err := g.store.UpdateRequest(ctx, r.ID, actor.ID, func(x *approval.Request) error {
		if x.State != approval.StateApproved {
			return errNoChange
		}
		if x.BaseRevision != cur.Revision {
			x.State, x.Reason = approval.StateInvalidated, ReasonPolicyRevision
			return nil
		}
		if err := x.Consume(approval.Binding{Principal: actor.ID, ArgumentsHash: x.ArgumentsHash}, "", g.now()); err != nil {
			return err
		}
		x.ConsumeToken = token
		return nil
	})
	if err != nil && !errors.Is(err, errNoChange) {
		consumed, err = g.readBackPolicyConsume(ctx, r.ID, token, err)
	}
	switch {
	case errors.Is(err, errNoChange):
		// A concurrent identical request consumed it first. Making a new
		// request now would put a stale one in front of approvers while the
		// winner applies the very same change: wait until the winner is
		// done, then look again (the change then no longer widens).
		g.awaitOutcome(ctx, r.ID)
		return PolicyResult{}, true, errPolicyMoved
	case err != nil && transient(err):
		// The store failed and the consume is not known to have
		// committed: nothing applied; the caller may send it again (a new
		// request now would only fail the same way, or stand in front of
		// approvers beside an approved one).
		return PolicyResult{}, true, fmt.Errorf("consume session policy approval %s: %w", r.ID, err)
	case err != nil:
		g.log.WarnContext(ctx, "cannot consume a session policy approval", "approval", r.ID, "err", err)
		return PolicyResult{}, false, nil
	case consumed.State != approval.StateConsumed:
		return PolicyResult{}, false, nil
	}
	g.hub.wake(string(r.ID))
	s, changed, err := g.store.UpdateSessionWithChain(ctx, cur.ID, actor.ID, g.now(), func(s *session.Session, ancestors session.Chain) error {
		if s.Revision != consumed.BaseRevision {
			return fmt.Errorf("%w: revision is %d, approved against %d", ErrPolicyChanged, s.Revision, consumed.BaseRevision)
		}
		if err := g.checkCeiling(s, ancestors, norm); err != nil {
			return err
		}
		norm.Apply(s)
		return nil
	})
	if err != nil && transient(err) {
		if got, ok := g.readBackSessionChange(ctx, cur, norm); ok {
			g.log.InfoContext(ctx, "approved session policy change applied although its write answered an error", "session", got.ID, "approval", r.ID, "err", err)
			s, changed, err = got, true, nil
		}
	}
	outcome := approval.OutcomeOK
	if err != nil {
		outcome = approval.OutcomeToolError
	}
	if _, oerr := g.store.UpdateRequest(ctx, r.ID, "toolgate", func(x *approval.Request) error { return x.RecordOutcome(outcome) }); oerr != nil {
		g.log.WarnContext(ctx, "cannot record the outcome of a session policy approval", "approval", r.ID, "err", oerr)
	}
	g.hub.wake(string(r.ID)) // identical requests that lost the consume wait for this
	if err != nil {
		return PolicyResult{}, true, err
	}
	g.log.InfoContext(ctx, "approved session policy change applied", "session", s.ID, "approval", r.ID, "revision", s.Revision)
	if changed {
		g.voidStalePolicyRequests(ctx, s)
	}
	return PolicyResult{Status: PolicyApplied, Session: s, Changed: changed, Approval: consumed}, true, nil
}

// readBackPolicyConsume reads request id back after its consume answered
// err: the request consumed with token is this consume's, committed
// although it answered an error, and is returned with a nil error; else
// err is returned as it was.
func (g *Gate) readBackPolicyConsume(ctx context.Context, id approval.ID, token string, err error) (approval.Request, error) {
	got, gerr := g.store.GetRequest(context.WithoutCancel(ctx), id)
	if gerr == nil && got.ConsumedWith(token) {
		g.log.InfoContext(ctx, "session policy approval consumed although its write answered an error; applying", "approval", id, "err", err)
		return got, nil
	}
	return approval.Request{}, err
}

// readBackSessionChange reads session cur.ID back after the write of the
// approved change norm on cur answered a store error: the write may have
// committed although its reply was lost. ok is true when the session is
// at cur.Revision+1 with exactly the policy norm makes of cur: the
// change this caller applied (the approval it consumed is the only way
// to that state from cur's revision: an identical proposal is the same
// approval, and a narrowing cannot make what widens).
func (g *Gate) readBackSessionChange(ctx context.Context, cur session.Session, norm session.Change) (session.Session, bool) {
	chain, err := g.store.Chain(context.WithoutCancel(ctx), cur.ID)
	if err != nil || len(chain) == 0 {
		return session.Session{}, false
	}
	got, want := chain[0], cur
	want.Tools = slices.Clone(cur.Tools)
	want.RequireApproval = maps.Clone(cur.RequireApproval)
	norm.Apply(&want)
	if got.Revision != cur.Revision+1 || got.Mode != want.Mode || !slices.Equal(got.Tools, want.Tools) ||
		!maps.EqualFunc(got.RequireApproval, want.RequireApproval, func(a, b session.Requirement) bool {
			return a.All == b.All && slices.Equal(a.Tools, b.Tools)
		}) {
		return session.Session{}, false
	}
	return got, true
}

// awaitOutcome waits, at most RetryWait, until the consumed request id has
// its outcome recorded (or is no longer consumed).
func (g *Gate) awaitOutcome(ctx context.Context, id approval.ID) {
	t := time.NewTimer(g.opts.RetryWait)
	defer t.Stop()
	for {
		woke, unsub := g.hub.subscribe(string(id))
		r, err := g.store.GetRequest(ctx, id)
		if err != nil || r.State != approval.StateConsumed || r.DispatchOutcome != approval.OutcomeNone {
			unsub()
			return
		}
		select {
		case <-woke.C:
		case <-t.C:
			unsub()
			return
		case <-ctx.Done():
			unsub()
			return
		}
		unsub()
	}
}

// capPolicyRequests names the cap on a session's pending policy requests.
const capPolicyRequests = "sessions.max_pending_policy_requests"

// newPolicyRequest records a pending session_policy approval for cur. The
// store creates it only while cur is at its revision (else errPolicyMoved)
// and fewer than MaxPolicyRequests unexpired ones are pending (else
// ErrTooManyPolicyRequests), both checked in the creating transaction.
// The approvers and validity come from the deployment policy in force now
// (Options.SessionApprovalFunc), not from the one at startup.
func (g *Gate) newPolicyRequest(ctx context.Context, actor approval.Principal, cur session.Session, display json.RawMessage, hash string, widens []string) (approval.Request, error) {
	now := g.now().UTC()
	id, err := approval.NewID()
	if err != nil {
		return approval.Request{}, fmt.Errorf("policy request id: %w", err)
	}
	ap := g.sessionApproval().Approval
	r := approval.Request{
		ID:                id,
		State:             approval.StatePending,
		Arguments:         display,
		ArgumentsHash:     hash,
		DisplayWarnings:   []string{"widens: " + session.Describe(widens)},
		Rule:              PolicyRule,
		Mode:              policy.ModeRetry,
		RequestedBy:       actor.ID,
		OnBehalfOf:        cur.OnBehalfOf,
		Tenant:            cur.Tenant,
		CreatedAt:         now,
		ExpiresAt:         now.Add(g.policyRequestTimeout()),
		RequiredApprovals: max(ap.Approvals, 1),
		Approvers:         ap.Approvers,
		ValidFor:          ap.ValidFor,
		Kind:              approval.KindSessionPolicy,
		Target:            string(cur.ID),
		BaseRevision:      cur.Revision,
	}
	limit := g.maxPolicyRequests()
	err = g.store.CreateRequest(ctx, r, store.Cap{Scope: store.CapPolicyRequests, Key: string(cur.ID), Limit: limit, Name: capPolicyRequests})
	var ce *store.CapError
	switch {
	case errors.As(err, &ce):
		return approval.Request{}, fmt.Errorf("%w: %d are pending (the limit is %d, %s); wait for decisions or let them expire", ErrTooManyPolicyRequests, ce.Pending, limit, capPolicyRequests)
	case errors.Is(err, store.ErrConflict):
		return approval.Request{}, errPolicyMoved
	case err != nil:
		return approval.Request{}, fmt.Errorf("record policy request: %w", err)
	}
	g.metrics.ApprovalRequested()
	g.log.InfoContext(ctx, "session policy request awaits approval", "approval", id, "session", cur.ID,
		"base_revision", cur.Revision, "expires_at", r.ExpiresAt, "arguments_hash", hash)
	return store.Normalize(r), nil
}

// voidStalePolicyRequests cancels the pending, and invalidates the
// approved, policy requests of s made against an older revision: they can
// never apply. It is best effort (a stale request is also refused when it
// is used).
func (g *Gate) voidStalePolicyRequests(ctx context.Context, s session.Session) {
	for _, st := range []approval.State{approval.StatePending, approval.StateApproved} {
		f := store.Filter{Kind: approval.KindSessionPolicy, Target: string(s.ID), State: st}
		for {
			rs, next, err := g.store.ListRequests(ctx, f)
			if err != nil {
				g.log.WarnContext(ctx, "cannot list stale policy requests", "session", s.ID, "err", err)
				break
			}
			for _, r := range rs {
				if r.BaseRevision < s.Revision {
					g.voidPolicyRequest(ctx, r.ID)
				}
			}
			if next == "" {
				break
			}
			f.Cursor = next
		}
	}
}

// voidPolicyRequest moves a pending policy request to cancelled, or an
// approved one to invalidated, with ReasonPolicyRevision.
func (g *Gate) voidPolicyRequest(ctx context.Context, id approval.ID) {
	_, err := g.store.UpdateRequest(ctx, id, "toolgate", func(r *approval.Request) error {
		switch r.State {
		case approval.StatePending:
			r.State = approval.StateCancelled
		case approval.StateApproved:
			r.State = approval.StateInvalidated
		default:
			return errNoChange
		}
		r.Reason = ReasonPolicyRevision
		return nil
	})
	switch {
	case err == nil:
		g.hub.wake(string(id))
		g.log.InfoContext(ctx, "stale session policy request voided", "approval", id)
	case !errors.Is(err, errNoChange):
		g.log.WarnContext(ctx, "cannot void a stale policy request", "approval", id, "err", err)
	}
}

// PolicyAnswer is the JSON answer to a session policy request, as the
// agent-side API (POST /v1/sessions/{id}/policy-requests) and the built-in
// MCP tool toolgate__request_policy_change give it:
//
//	{"status":"applied","revision":3,"changed":true,"message":…}
//	{"status":"approval_required","approval_id":…,"expires_at":…,"revision":2,"widens":[…],"message":…}
//	{"status":"denied","approval_id":…,"decided_by":…,"reason":…,"revision":2,"message":…}
type PolicyAnswer struct {
	Status     string    `json:"status"`
	ApprovalID string    `json:"approval_id,omitempty"`
	ExpiresAt  time.Time `json:"expires_at,omitzero"`
	// Revision is the session's revision after the request.
	Revision  int64    `json:"revision"`
	Changed   bool     `json:"changed,omitempty"`
	Widens    []string `json:"widens,omitempty"`
	DecidedBy string   `json:"decided_by,omitempty"`
	Reason    string   `json:"reason,omitempty"`
	Message   string   `json:"message"`
}

// Answer returns res as the agent sees it.
func (res PolicyResult) Answer() PolicyAnswer {
	a := PolicyAnswer{Status: res.Status, Revision: res.Session.Revision, Changed: res.Changed, Widens: res.Widens}
	switch res.Status {
	case PolicyApplied:
		a.Message = fmt.Sprintf("applied: the session's policy is now at revision %d", res.Session.Revision)
		if !res.Changed {
			a.Message = "applied: the session's policy already was as asked; nothing changed"
		}
	case PolicyApprovalRequired:
		a.ApprovalID, a.ExpiresAt = string(res.Approval.ID), res.Approval.ExpiresAt.UTC()
		a.Message = fmt.Sprintf("approval required: the change widens the session's policy (%s), so nothing was applied; "+
			"a human approver must approve request %s. Send the identical request again after approval to apply it; the request expires at %s.",
			session.Describe(res.Widens), res.Approval.ID, a.ExpiresAt.Format(time.RFC3339))
	case PolicyDenied:
		a.ApprovalID, a.DecidedBy, a.Reason = string(res.Approval.ID), res.Approval.DecidedBy, res.Approval.Reason
		a.Message = fmt.Sprintf("denied by %s: %s; nothing was applied", res.Approval.DecidedBy, orNone(res.Approval.Reason))
	}
	return a
}
