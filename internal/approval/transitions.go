package approval

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors of the transitions. Callers branch on them with errors.Is;
// internal/api maps them to HTTP statuses.
var (
	// ErrResolved means the request is no longer in a state that allows the
	// transition (for a review: no longer pending).
	ErrResolved = errors.New("approval: request already resolved")
	// ErrExpired means the request is pending but its deadline has passed;
	// the sweeper will move it to expired.
	ErrExpired = errors.New("approval: request expired")
	// ErrSelfReview means the reviewer is the requesting principal or the
	// person it acts for.
	ErrSelfReview = errors.New("approval: cannot review own request")
	// ErrNotEligible means the reviewer is not among the request's Approvers.
	ErrNotEligible = errors.New("approval: reviewer not eligible")
	// ErrConflict means the reviewer already gave a different verdict;
	// reviews never overwrite each other.
	ErrConflict = errors.New("approval: conflicting review")
	// ErrDuplicate means the reviewer repeats the verdict already recorded;
	// nothing changes, and callers answer with the current state.
	ErrDuplicate = errors.New("approval: review already recorded")
	// ErrHashMismatch means the reviewer pinned an arguments hash that is not
	// the request's: they looked at different arguments.
	ErrHashMismatch = errors.New("approval: arguments hash mismatch")
	// ErrNotApproved means consume was tried on a request that is not approved.
	ErrNotApproved = errors.New("approval: request not approved")
	// ErrNotDue means Expire was called before the request's deadline.
	ErrNotDue = errors.New("approval: request not due to expire")
	// ErrInvalidVerdict means a verdict other than approve or deny.
	ErrInvalidVerdict = errors.New("approval: invalid verdict")
)

// Reasons recorded by the transitions. Callers may show them to agents and
// approvers.
const (
	ReasonTimedOut        = "timed out"
	ReasonCancelled       = "cancelled by the caller"
	ReasonUnusedApproval  = "approved but not used within valid_for"
	ReasonNoLongerValid   = "approval no longer valid"
	ReasonPrincipal       = "called by a different principal than the requester"
	ReasonServer          = "server differs from the approved call"
	ReasonTool            = "tool differs from the approved call"
	ReasonArguments       = "arguments changed since approval"
	ReasonToolDefinition  = "tool definition changed since approval"
	reasonPolicyDeniesFmt = "policy now denies the call (rule %q)"
)

// RecheckWords say what an approved call still goes through before it
// runs, for people (after "the call runs when its holder "): the dispatch
// re-check (ConsumeQuorum), which invalidates the approval instead when
// the policy in force denies the call, when its approvals no longer meet
// the quorum that policy requires (more approvals, other approvers, an
// approver no longer eligible), or when the approval lapsed. A policy
// that now allows the call outright does not: the approved call runs.
// The CLI, the web inbox and the Slack notifier tell approvers so.
const RecheckWords = "re-checks it against the policy in force and its approval quorum"

// Reviewer is the authenticated principal reviewing a request.
type Reviewer struct {
	ID     string
	Groups []string
}

// Review records rv's verdict v on r at time now, and settles r when that
// verdict decides it: a deny moves r to denied at once; an approval moves it
// to approved once the approvals of distinct reviewers reach
// RequiredApprovals (at least 1). The settling reviewer becomes DecidedBy,
// and its reason the request's Reason.
//
// Checks, in this order, each returning its sentinel and changing nothing:
// an invalid verdict or empty reviewer id (ErrInvalidVerdict, ErrNotEligible);
// rv already reviewed r, in any state (ErrDuplicate for the same verdict,
// ErrConflict for another); r not pending (ErrResolved); now at or past
// ExpiresAt (ErrExpired); rv is RequestedBy or OnBehalfOf (ErrSelfReview);
// rv not eligible (ErrNotEligible: Approvers is not empty and lists neither
// rv.ID nor "group:<g>" for one of rv.Groups); pinnedHash set and different
// from ArgumentsHash (ErrHashMismatch).
func (r *Request) Review(rv Reviewer, v Verdict, reason, pinnedHash string, now time.Time) error {
	if v != VerdictApprove && v != VerdictDeny {
		return fmt.Errorf("%w %q", ErrInvalidVerdict, v)
	}
	if rv.ID == "" {
		return fmt.Errorf("%w: empty reviewer id", ErrNotEligible)
	}
	if prev, ok := r.reviewBy(rv.ID); ok {
		if prev.Verdict == v {
			return ErrDuplicate
		}
		return fmt.Errorf("%w: %s already voted %s", ErrConflict, rv.ID, prev.Verdict)
	}
	switch {
	case r.State != StatePending:
		return fmt.Errorf("%w: state is %s", ErrResolved, r.State)
	case !now.Before(r.ExpiresAt):
		return ErrExpired
	case IsRequester(rv.ID, r.RequestedBy, r.OnBehalfOf):
		return ErrSelfReview
	case !r.eligible(rv):
		return ErrNotEligible
	case pinnedHash != "" && pinnedHash != r.ArgumentsHash:
		return ErrHashMismatch
	}
	r.Reviews = append(r.Reviews, Review{By: rv.ID, Verdict: v, Reason: reason, At: now})
	switch {
	case v == VerdictDeny:
		r.settle(StateDenied, rv.ID, reason, now)
	case r.approvals() >= max(r.RequiredApprovals, 1):
		r.settle(StateApproved, rv.ID, reason, now)
	}
	return nil
}

// Eligible reports whether rv could review r, leaving aside r's state and
// deadline: it returns ErrSelfReview when rv is RequestedBy or OnBehalfOf,
// ErrNotEligible when rv is not among Approvers (or has no id), and
// ErrDuplicate when rv has already reviewed r; nil otherwise. It applies the
// same rules as Review, so an inbox can say in advance who may act.
func (r *Request) Eligible(rv Reviewer) error {
	switch {
	case rv.ID == "":
		return ErrNotEligible
	case IsRequester(rv.ID, r.RequestedBy, r.OnBehalfOf):
		return ErrSelfReview
	case !r.eligible(rv):
		return ErrNotEligible
	}
	if _, ok := r.reviewBy(rv.ID); ok {
		return ErrDuplicate
	}
	return nil
}

// IsRequester reports whether id is the requester of a request made by
// requestedBy on behalf of onBehalfOf, who may not review it
// (ErrSelfReview): compared without case, "Alice" in on_behalf_of is
// alice (fail closed). A listing of a request's approvers marks them
// with it (the proposer of a policy change is among its admins).
func IsRequester(id, requestedBy, onBehalfOf string) bool {
	return strings.EqualFold(id, requestedBy) || (onBehalfOf != "" && strings.EqualFold(id, onBehalfOf))
}

func (r *Request) reviewBy(id string) (Review, bool) {
	for _, rv := range r.Reviews {
		if rv.By == id {
			return rv, true
		}
	}
	return Review{}, false
}

// eligible reports whether rv may review r. A plain entry of Approvers names
// a principal id; an entry "group:<g>" names a group, and never matches a
// principal whose id happens to be that text.
func (r *Request) eligible(rv Reviewer) bool {
	if len(r.Approvers) == 0 {
		return true
	}
	for _, a := range r.Approvers {
		if g, ok := strings.CutPrefix(a, "group:"); ok {
			for _, rg := range rv.Groups {
				if rg == g && g != "" {
					return true
				}
			}
		} else if a == rv.ID {
			return true
		}
	}
	return false
}

// approvals counts distinct reviewers who approved.
func (r *Request) approvals() int {
	seen := make(map[string]bool, len(r.Reviews))
	for _, rv := range r.Reviews {
		if rv.Verdict == VerdictApprove {
			seen[rv.By] = true
		}
	}
	return len(seen)
}

func (r *Request) settle(s State, by, reason string, now time.Time) {
	r.State = s
	r.DecidedBy = by
	r.DecidedAt = now
	r.Reason = reason
}

// Cancel moves a pending request to cancelled (the caller sent
// notifications/cancelled), with Reason ReasonCancelled. It returns
// ErrResolved for any other state. now is accepted for symmetry with the
// other transitions and recorded nowhere: the event log has the time.
func (r *Request) Cancel(now time.Time) error {
	if r.State != StatePending {
		return fmt.Errorf("%w: state is %s", ErrResolved, r.State)
	}
	r.State = StateCancelled
	r.Reason = ReasonCancelled
	return nil
}

// Withdraw is the caller's cancellation of a request whose call has not
// run: a pending request, or an approved one that was not consumed yet
// (the Tasks extension's tasks/cancel may arrive between the decision and
// the dispatch; SEP-2848 has the cancel win there), moves to cancelled
// with Reason ReasonCancelled. Any other state is ErrResolved.
func (r *Request) Withdraw(now time.Time) error {
	if r.State != StatePending && r.State != StateApproved {
		return fmt.Errorf("%w: state is %s", ErrResolved, r.State)
	}
	r.State = StateCancelled
	r.Reason = ReasonCancelled
	return nil
}

// Expire moves r to expired when it is due as of now: a pending request at or
// past ExpiresAt (Reason ReasonTimedOut), or an approved one at or past
// ValidUntil when ValidFor > 0 (Reason ReasonUnusedApproval). It returns
// ErrNotDue for a pending or approved request that is not due, and
// ErrResolved for a terminal one. DecidedBy and DecidedAt are kept.
func (r *Request) Expire(now time.Time) error {
	switch r.State {
	case StatePending:
		if now.Before(r.ExpiresAt) {
			return ErrNotDue
		}
		r.State = StateExpired
		r.Reason = ReasonTimedOut
		return nil
	case StateApproved:
		vu := r.ValidUntil()
		if vu.IsZero() || now.Before(vu) {
			return ErrNotDue
		}
		r.State = StateExpired
		r.Reason = ReasonUnusedApproval
		return nil
	}
	return fmt.Errorf("%w: state is %s", ErrResolved, r.State)
}

// ValidUntil returns when an approved request stops being usable:
// DecidedAt + ValidFor. It returns the zero time when ValidFor is not
// positive or r has no decision time, meaning no limit beyond the request's
// own life. Only meaningful once r was approved.
func (r *Request) ValidUntil() time.Time {
	if r.ValidFor <= 0 || r.DecidedAt.IsZero() {
		return time.Time{}
	}
	return r.DecidedAt.Add(r.ValidFor)
}

// Consume is the approved → consumed transition done immediately before
// dispatch. It returns an error wrapping ErrNotApproved, and changes
// nothing, unless r is approved. Otherwise it revalidates, in this order:
// the approval is still valid at now (ValidUntil); b matches r's binding
// field by field (principal, server, tool, arguments hash, tool digest);
// deniedBy, the name of a policy rule that now denies the call, is empty.
// The first failure moves r to invalidated with a Reason saying which check
// failed and returns nil, so the store records it; callers check r.State.
// Success moves r to consumed with ConsumedAt = now.
func (r *Request) Consume(b Binding, deniedBy string, now time.Time) error {
	return r.ConsumeQuorum(b, deniedBy, "", now)
}

// ConsumeQuorum is Consume with one more check, made last: short, when
// not "", says why r's approvals no longer meet the quorum the policy in
// force requires of the call (raised, or who may approve changed, after r
// was approved), and is the reason r is invalidated with when every other
// check passed.
func (r *Request) ConsumeQuorum(b Binding, deniedBy, short string, now time.Time) error {
	if r.State != StateApproved {
		return fmt.Errorf("consume in state %s: %w", r.State, ErrNotApproved)
	}
	want := r.Binding()
	var why string
	switch vu := r.ValidUntil(); {
	case !vu.IsZero() && !now.Before(vu):
		why = ReasonNoLongerValid
	case b.Principal != want.Principal:
		why = ReasonPrincipal
	case b.Server != want.Server:
		why = ReasonServer
	case b.Tool != want.Tool:
		why = ReasonTool
	case b.ArgumentsHash != want.ArgumentsHash:
		why = ReasonArguments
	case b.ToolDigest != want.ToolDigest:
		why = ReasonToolDefinition
	case deniedBy != "":
		why = fmt.Sprintf(reasonPolicyDeniesFmt, deniedBy)
	case short != "":
		why = short
	}
	if why != "" {
		r.State = StateInvalidated
		r.Reason = why
		return nil
	}
	r.State = StateConsumed
	r.ConsumedAt = now
	return nil
}

// ConsumedWith reports whether r was consumed by the consume that carried
// token (non-empty) and its dispatch outcome is not recorded yet: the
// consume of the holder that made token committed, and nothing has
// dispatched the call or given up on it since. It is the only way a
// request already consumed may still be dispatched, and only by that
// holder.
func (r *Request) ConsumedWith(token string) bool {
	return token != "" && r.State == StateConsumed && r.ConsumeToken == token && r.DispatchOutcome == OutcomeNone
}

// RecordOutcome records what happened when the consumed request was
// dispatched. It returns ErrResolved unless r is consumed with no outcome
// yet, and an error for OutcomeNone or an unknown outcome.
func (r *Request) RecordOutcome(o Outcome) error {
	switch o {
	case OutcomeOK, OutcomeToolError, OutcomeTransportError, OutcomeCancelledAfterDispatch, OutcomeUnknown:
	default:
		return fmt.Errorf("approval: unknown dispatch outcome %q", o)
	}
	if r.State != StateConsumed || r.DispatchOutcome != OutcomeNone {
		return fmt.Errorf("%w: state %s, outcome %q", ErrResolved, r.State, r.DispatchOutcome)
	}
	r.DispatchOutcome = o
	return nil
}

// Renew makes holder the holder of r with a lease until the given time. It
// does not check who held r before: taking over a lapsed lease is the
// caller's decision (see LeaseLapsed).
func (r *Request) Renew(holder string, until time.Time) {
	r.HeldBy = holder
	r.LeaseUntil = until
}

// Release ends holder's lease at now, so another identical call may pick r
// up at once. It does nothing when holder does not hold r, and never
// extends a lease that already ended.
func (r *Request) Release(holder string, now time.Time) {
	if r.HeldBy != holder || holder == "" {
		return
	}
	if r.LeaseUntil.IsZero() || now.Before(r.LeaseUntil) {
		r.LeaseUntil = now
	}
}

// LeaseLapsed reports whether nobody holds r as of now: no holder, or a
// lease that ended at or before now.
func (r *Request) LeaseLapsed(now time.Time) bool {
	return r.HeldBy == "" || !now.Before(r.LeaseUntil)
}

// Answer records at now that r's denial was delivered to the caller (the
// holder, or an identical re-send). It returns ErrResolved unless r is
// denied and not answered yet, so a denial is answered exactly once.
func (r *Request) Answer(now time.Time) error {
	if r.State != StateDenied || !r.AnsweredAt.IsZero() {
		return fmt.Errorf("%w: state %s, answered %v", ErrResolved, r.State, !r.AnsweredAt.IsZero())
	}
	r.AnsweredAt = now
	return nil
}

// Sweep applies whichever timed transition is due as of now: Expire for a
// pending or approved request, or, for a consumed request whose dispatcher
// held a lease that lapsed before an outcome was recorded (its process
// died between consume and result), the outcome OutcomeUnknown. It returns
// ErrNotDue when nothing is due and ErrResolved for other terminal states.
func (r *Request) Sweep(now time.Time) error {
	switch r.State {
	case StatePending, StateApproved:
		return r.Expire(now)
	case StateConsumed:
		if r.DispatchOutcome != OutcomeNone {
			return fmt.Errorf("%w: outcome already recorded", ErrResolved)
		}
		if r.HeldBy == "" || now.Before(r.LeaseUntil) {
			return ErrNotDue
		}
		r.DispatchOutcome = OutcomeUnknown
		return nil
	}
	return fmt.Errorf("%w: state is %s", ErrResolved, r.State)
}
