// Package store defines the persistence contract for approval requests,
// sessions, policy revisions and grants. The implementation is
// internal/store/sqlstore (SQLite or Postgres); storetest holds the
// conformance suite it passes with each.
package store

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/session"
)

// Sentinel errors. Backends wrap them with %w; callers use errors.Is.
var (
	ErrNotFound      = errors.New("store: not found")
	ErrAlreadyExists = errors.New("store: already exists")
	// ErrUnavailable wraps failures to reach the database (connection refused,
	// closed pool, I/O errors) so callers can fail closed with a clear message.
	ErrUnavailable = errors.New("store: unavailable")
	// ErrInDoubt wraps a write whose COMMIT was sent and whose outcome
	// could not be learned: the connection ended without its answer and
	// the database could not say (in time) whether the transaction
	// committed. It always comes with ErrUnavailable in its chain, so a
	// caller that fails closed on ErrUnavailable does so here too; a
	// caller that retries must recognise its own earlier write (the write
	// may stand). Postgres only (sqlstore's pgSettle).
	ErrInDoubt = errors.New("store: commit outcome unknown")
)

// A Lease is a request's state and lease as GetRequest reads them
// (Store.EachLease).
type Lease struct {
	ID         approval.ID
	State      approval.State
	HeldBy     string
	LeaseUntil time.Time
}

// Filter selects requests for ListRequests. Zero fields do not filter.
type Filter struct {
	State       approval.State
	RequestedBy string
	Tenant      string
	// IDPrefix matches ids starting with this text (CLI short ids).
	IDPrefix string
	// IDSuffix matches ids ending with this text (short ids: the end of a
	// UUIDv7 is random, so a few characters of it are usually unique while
	// ids made close together share their first characters).
	IDSuffix string
	// Server and Tool match the request's real server and tool names
	// exactly.
	Server string
	Tool   string
	// CreatedFrom and CreatedBefore bound CreatedAt: CreatedFrom <=
	// CreatedAt < CreatedBefore; a zero time does not bound.
	CreatedFrom   time.Time
	CreatedBefore time.Time
	// Decided selects requests that left pending (any other state); it is
	// ignored when State is set.
	Decided bool
	// Kind and Target select policy approvals (approval.Request.Kind and
	// Target); Kind approval.KindToolCall also matches the empty kind.
	Kind   string
	Target string
	// Limit caps the page size; 0 means 100. Cursor is the next cursor of
	// the previous page ("" for the first): opaque, read by
	// ParseListCursor (a bad one is ErrBadCursor). Pages are in list order
	// (ListPosition: the order in which the store created the requests,
	// whatever their ids' clocks say), oldest first, or newest first when
	// Descending is set. Oldest first, a reader that follows the cursors
	// to "" sees every matching request created before it read its last
	// page; newest first, every one created before it read its first.
	Limit      int
	Cursor     string
	Descending bool
}

// A Store persists approval requests and their event log. All methods are
// safe for concurrent use, including by several processes sharing one
// database. Times are stored in UTC with millisecond precision and come from
// the caller, never from the database clock. Arguments (the display copy) is
// stored byte for byte (not re-encoded, so key order is kept); nil and empty
// slices may come back either way.
type Store interface {
	// CreateRequest inserts r (which must be pending) and writes its
	// "requested" event in the same transaction. ErrAlreadyExists if the id
	// is taken. Each cap is checked inside that transaction, serialized
	// with every other creator of the same scope (in this process and in
	// any other sharing the database), so caps hold under concurrency: a
	// cap already reached refuses r with a *CapError (errors.Is
	// ErrCapReached) and nothing is written. A request of a session's
	// principal (the sessions row whose principal is r.RequestedBy) is
	// refused with session.ErrRevoked when that session or an ancestor is
	// revoked, serialized with RevokeSession, so no request of a subtree
	// appears after its revocation committed. A session_policy request
	// (Kind approval.KindSessionPolicy, Target the session id) is refused
	// with ErrConflict unless the target session's revision is still
	// BaseRevision; the session row is held until commit, so a policy
	// change that commits later sees the request (and can void it).
	CreateRequest(ctx context.Context, r approval.Request, caps ...Cap) error
	// GetRequest returns the request or ErrNotFound.
	GetRequest(ctx context.Context, id approval.ID) (approval.Request, error)
	// ViewRequest is GetRequest for a person looking at the request (the
	// admin API, the inbox): a store with connections reserved for such
	// reads uses them, so it answers while the calls' writes keep the rest
	// busy.
	ViewRequest(ctx context.Context, id approval.ID) (approval.Request, error)
	// ListRequests returns one page and the cursor of the next ("" at the
	// end), in list order (see Filter). It lists for people and their
	// tools, like ViewRequest.
	ListRequests(ctx context.Context, f Filter) (rs []approval.Request, next string, err error)
	// EachRequest is ListRequests that hands the page's requests to fn one
	// at a time, in order, as they are read, instead of collecting them
	// (the admin API streams a page of up to 1,000); fn runs with no read
	// of the store open (sqlstore reads the page in batches). An error of
	// fn ends the page and is returned as is. next is "" whenever err is
	// not nil.
	EachRequest(ctx context.Context, f Filter, fn func(approval.Request) error) (next string, err error)
	// EachLease reads the lease of each request of ids that exists, in
	// a few statements (one per few hundred ids), and hands it to fn, in
	// no particular order; an id with no request is skipped. The lease is
	// as GetRequest would report it (State, HeldBy, LeaseUntil). A take-over
	// waiting for another instance's lease reads them all at once when the
	// store tells of writes it cannot name (gate.Gate.Touched).
	EachLease(ctx context.Context, ids []approval.ID, fn func(Lease)) error
	// UpdateRequest runs fn on the current value inside one transaction that
	// holds the row (SQLite: an IMMEDIATE transaction; Postgres: SELECT … FOR
	// UPDATE), then stores the result and writes one event per change: a
	// "reviewed" event for each added review, and an event named after the new
	// state when the state changed (preceded by "approved" when a pending
	// request was approved and consumed or invalidated in the one change;
	// plus "dispatched" when DispatchOutcome was set). If fn returns an error nothing is written and that error is
	// returned. fn may run more than once: it must have no side effects.
	// actor names who made the change, for the events; the events written
	// are exactly those of [ChangeEvents]. The returned value is what was
	// stored (see [Normalize]).
	UpdateRequest(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) error) (approval.Request, error)
	// UpdateRequestWithChain is UpdateRequest for a decision that depends
	// on the requesting session: inside the same transaction, after the
	// request's row is held, it reads the chain of the session whose
	// principal is the request's RequestedBy (nil when it is not a
	// session's) and passes it to fn. RevokeSession changes the requests
	// of a subtree while holding their rows, so the consume of an approved
	// request either commits before a revocation (and the revocation then
	// finds it consumed) or sees the session revoked: once RevokeSession
	// returned, nothing of that subtree can be consumed.
	UpdateRequestWithChain(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request, session.Chain) error) (approval.Request, error)
	// UpdateRequestReading is UpdateRequest that also reads, inside the
	// same transaction after the request's row is held, what reads asks
	// for, and passes it to fn: the chain as UpdateRequestWithChain reads
	// it, and the newest deployment policy revision under the policy lock
	// (see [TxReads]). The consume of an approved call with
	// policy.source: store uses it (gate.Options.Policies).
	UpdateRequestReading(ctx context.Context, id approval.ID, actor string, reads TxReads, fn func(*approval.Request, TxRead) error) (approval.Request, error)
	// RenewLeases extends, in one statement per few hundred ids, the
	// leases held by holder on ids to until: only requests that holder
	// still holds (HeldBy == holder) and that still need a holder
	// (pending, approved, or consumed with no dispatch outcome). It returns
	// the ids it renewed, in the order of ids (it may return ids itself
	// when it renewed every one: the caller must not change ids while it
	// uses the answer); an id missing from the answer was taken over,
	// released or settled. It writes no events. A
	// held request holder no
	// longer names stops being renewed and lapses at the lease the
	// previous renewal gave it. sqlstore renews one row per holder
	// (instance leases, migration 14), not one per request.
	RenewLeases(ctx context.Context, holder string, ids []approval.ID, until time.Time) ([]approval.ID, error)
	// Due lists requests that a sweeper must look at as of now: pending ones
	// with ExpiresAt <= now; approved ones whose validity has passed:
	// ValidFor > 0 and DecidedAt+ValidFor <= now, as in
	// approval.Request.ValidUntil (ValidFor 0 means no limit); and consumed
	// ones with no dispatch outcome whose holder's lease ended
	// (HeldBy != "" and LeaseUntil <= now: the dispatching process died).
	// At most limit ids (0 means 100), in no particular order. The sweeper
	// then moves each through UpdateRequest (approval.Request.Sweep), so
	// every timed transition is a compare-and-set too.
	Due(ctx context.Context, now time.Time, limit int) ([]approval.ID, error)
	// OpenIdentical returns the requests an identical call (same principal,
	// server, tool and arguments hash) may still attach to: pending and
	// approved ones, and denied ones whose denial was not answered yet
	// (AnsweredAt zero). Oldest first, at most 100.
	OpenIdentical(ctx context.Context, principal, server, tool, argumentsHash string) ([]approval.Request, error)
	// CountPending counts pending requests that agents make (kind "",
	// tool_call, resource_read or prompt_get), of one principal when
	// requestedBy is not empty. Policy approvals have their own limits
	// (count them with ListRequests).
	CountPending(ctx context.Context, requestedBy string) (int, error)
	// Events returns events with Seq > after, in Seq order, at most limit
	// (0 means 100): a page of the log as committed so far. To follow the
	// log as it grows use Feed: on Postgres a transaction may commit after
	// one with a higher Seq, so paging by Seq can skip it.
	Events(ctx context.Context, after int64, limit int) ([]approval.Event, error)
	// Feed is the change feed: the events after cursor in feed order
	// (Cursor), at most limit (0 means 100), and the cursor of the last one
	// returned (after itself when none). It never returns an event while
	// an event that would come before it can still commit, so a reader
	// that passes back the cursor it got sees every committed event exactly
	// once and in the same order as every other reader: the order is
	// final. On SQLite (one writer at a time) feed order is Seq order; on
	// Postgres it is the order of the writing transactions' ids, then Seq,
	// and an event is returned once every older transaction has ended
	// (a long transaction elsewhere in the cluster delays the feed, never
	// reorders it). The audit chain, the live event stream and the gate's
	// wake-ups read events this way.
	Feed(ctx context.Context, after Cursor, limit int) ([]approval.Event, Cursor, error)
	// FeedEnd returns the cursor of the last event Feed can return now
	// (the zero Cursor for an empty log): a reader that starts there sees
	// every event committed from then on and none before.
	FeedEnd(ctx context.Context) (Cursor, error)
	// Prune deletes what the retention settings let go, as of now, and
	// says what it deleted: see Retention.
	Prune(ctx context.Context, r Retention, now time.Time) (Pruned, error)
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	Close() error

	SessionStore
	PolicyStore
	WebSessionStore
	LedgerStore
	GrantStore
}

// Normalize returns r with every time in UTC truncated to the millisecond and
// ValidFor (and the TTL of reviews' grant terms) truncated to the millisecond: the precision every backend stores.
// Backends return normalized values from every method, so a value read back
// compares equal to the one UpdateRequest returned. r is not modified (the
// Reviews slice is copied).
func Normalize(r approval.Request) approval.Request {
	r.CreatedAt = Millis(r.CreatedAt)
	r.ExpiresAt = Millis(r.ExpiresAt)
	r.DecidedAt = Millis(r.DecidedAt)
	r.ConsumedAt = Millis(r.ConsumedAt)
	r.LeaseUntil = Millis(r.LeaseUntil)
	r.AnsweredAt = Millis(r.AnsweredAt)
	r.ValidFor = r.ValidFor.Truncate(time.Millisecond)
	if r.Reviews != nil {
		rs := make([]approval.Review, len(r.Reviews))
		for i, rv := range r.Reviews {
			rv.At = Millis(rv.At)
			if rv.Grant != nil {
				t := *rv.Grant
				t.TTL = t.TTL.Truncate(time.Millisecond)
				rv.Grant = &t
			}
			rs[i] = rv
		}
		r.Reviews = rs
	}
	return r
}

// Millis returns t in UTC truncated to the millisecond; the zero time stays
// zero.
func Millis(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Millisecond)
}

// RequestedEvent returns the event CreateRequest writes for r: type
// "requested", state pending, actor r.RequestedBy, at r.CreatedAt. Seq is
// left for the backend to assign.
func RequestedEvent(r approval.Request) approval.Event {
	return approval.Event{RequestID: r.ID, Type: approval.EventRequested, State: r.State, Actor: r.RequestedBy, At: Millis(r.CreatedAt)}
}

// GatewayActor is the actor of the changes the gateway makes on its own
// account (consume at dispatch, outcomes, expiry, cancellation), in the
// event log and the audit trail.
const GatewayActor = "toolgate"

// ChangeEvents returns the events UpdateRequest writes for the change from
// before to after, in this order:
//
//   - one "reviewed" event per review appended to Reviews, at the review's At;
//   - when a pending request was approved and consumed (or invalidated at
//     the consume's check) in the same change, an "approved" event at
//     DecidedAt, then the new state's; the reviewed and approved events
//     then carry the state approved, the state they left the request in;
//   - when State changed, one event named after the new state, at DecidedAt
//     for approved/denied and ConsumedAt for consumed (when set), else now;
//   - "dispatched", at now, when DispatchOutcome went from "" to a value.
//
// Every event carries after.State (the state as committed) and actor, but
// in a joined change the consumed (or invalidated) event and what follows
// carry GatewayActor: the gateway consumed the call at dispatch, the
// reviewer only approved it (newuser4), as in a consume of its own. Seq is
// left for the backend to assign. Every backend uses this function, so they
// all write the same log.
func ChangeEvents(before, after approval.Request, actor string, now time.Time) []approval.Event {
	var evs []approval.Event
	// joined: approved and consumed (or invalidated at the consume's
	// check) in one change: the decision's transaction consumed a call
	// held by its process (gate.ReviewIf). The log still shows the
	// approval, and the events up to it carry the state they left the
	// request in (approved), as a decision and a consume in two changes
	// would have written them.
	joined := after.State != before.State && before.State == approval.StatePending && after.DecidedAt != before.DecidedAt &&
		(after.State == approval.StateConsumed || after.State == approval.StateInvalidated)
	state := after.State
	if joined {
		state = approval.StateApproved
	}
	ev := func(typ approval.EventType, at time.Time) {
		evs = append(evs, approval.Event{RequestID: after.ID, Type: typ, State: state, Actor: actor, At: Millis(at)})
	}
	if n := len(before.Reviews); len(after.Reviews) > n {
		for _, rv := range after.Reviews[n:] {
			at := rv.At
			if at.IsZero() {
				at = now
			}
			ev(approval.EventReviewed, at)
		}
	}
	if joined {
		ev(approval.EventApproved, after.DecidedAt)
		state = after.State
		actor = GatewayActor
	}
	if after.State != before.State {
		at := now
		switch {
		case (after.State == approval.StateApproved || after.State == approval.StateDenied) && !after.DecidedAt.IsZero():
			at = after.DecidedAt
		case after.State == approval.StateConsumed && !after.ConsumedAt.IsZero():
			at = after.ConsumedAt
		}
		ev(approval.EventType(after.State), at)
	}
	if before.DispatchOutcome == approval.OutcomeNone && after.DispatchOutcome != approval.OutcomeNone {
		ev(approval.EventDispatched, now)
	}
	return evs
}

// SessionStore persists agent sessions (package session) and writes their
// events to the same event log as approvals, in the same transaction as the
// change. Every backend implements it as part of Store. Methods are safe for
// concurrent use; times come from the caller and are stored in UTC with
// millisecond precision.
type SessionStore interface {
	// CreateSession inserts s (which must have an id, a token hash and
	// CreatedAt, and Revision 1) and writes one event: "session_created"
	// for a root, "child_created" for a child (ParentID set), with
	// SessionID s.ID, actor and at s.CreatedAt. A child whose parent (or
	// any ancestor) is revoked is refused with session.ErrRevoked; an
	// unknown parent gives ErrNotFound. ErrAlreadyExists if the id or the
	// token hash is taken.
	CreateSession(ctx context.Context, s session.Session, actor string) error
	// GetSession returns the session (revoked ones too), or ErrNotFound.
	GetSession(ctx context.Context, id session.ID) (session.Session, error)
	// SessionByToken returns the session whose TokenHash is tokenHash
	// (lowercase hex SHA-256), or ErrNotFound.
	SessionByToken(ctx context.Context, tokenHash string) (session.Session, error)
	// Chain returns the session and its ancestors, the session first and
	// the root last (session.Chain), read in one snapshot; ErrNotFound for
	// an unknown id.
	Chain(ctx context.Context, id session.ID) (session.Chain, error)
	// UpdateSession runs fn on the current session inside one transaction
	// that holds its row, like UpdateRequest. If fn returns an error nothing
	// is written and that error is returned. If the policy (Tools, Mode,
	// RequireApproval) is unchanged nothing is written and changed is
	// false; otherwise Revision is increased by one and one
	// "session_policy_changed" event is written with actor at now. Only the
	// policy fields may change. A revoked session gives session.ErrRevoked
	// without calling fn. fn may run more than once.
	UpdateSession(ctx context.Context, id session.ID, actor string, now time.Time, fn func(*session.Session) error) (s session.Session, changed bool, err error)
	// UpdateSessionWithChain is UpdateSession for a change that depends on
	// the session's ancestors: inside the same transaction, after the
	// session's row is held, it reads the ancestors (parent first; nil for
	// a root) and passes them to fn. Their rows are held until the
	// transaction ends, so no ancestor's policy changes between fn's check
	// and the write (and it is serialized with RevokeSession and a child's
	// CreateSession, which take the same lock first).
	UpdateSessionWithChain(ctx context.Context, id session.ID, actor string, now time.Time, fn func(*session.Session, session.Chain) error) (s session.Session, changed bool, err error)
	// RevokeSession revokes the session and all its descendants in one
	// transaction, at now: one "session_revoked" event each (actor); every
	// pending approval request of their principals (session.PrincipalID)
	// moves to cancelled with a "cancelled" event, and every approved one
	// not consumed yet to invalidated with an "invalidated" event (both
	// with reason ReasonSessionRevoked). Their rows are held while it
	// does so (see UpdateRequestWithChain), and it is serialized with
	// CreateRequest for the same session tree. Sessions already revoked are
	// left as they are. It returns what it changed; ErrNotFound for an
	// unknown id.
	RevokeSession(ctx context.Context, id session.ID, actor string, now time.Time) (Revocation, error)
	// CountPendingInTree counts the pending agent requests (the kinds
	// CountPending counts) of every
	// session in the tree below root (root included, revoked ones too), so
	// an agent cannot escape the per-principal pending cap by creating
	// child sessions.
	CountPendingInTree(ctx context.Context, root session.ID) (int, error)
}

// Revocation is what RevokeSession changed: the sessions it revoked (the
// given one first when it was live), the pending approval requests it
// cancelled and the approved ones it invalidated.
type Revocation struct {
	Sessions    []session.Session
	Cancelled   []approval.ID
	Invalidated []approval.ID
}

// ReasonSessionRevoked is the Reason of an approval request cancelled or
// invalidated because its session was revoked.
const ReasonSessionRevoked = "cancelled: the session was revoked"

// NormalizeSession returns s with its times in UTC truncated to the
// millisecond, its Tools normalized (nil only when not explicit) and its
// requirements normalized: what every backend returns.
func NormalizeSession(s session.Session) session.Session {
	s.CreatedAt = Millis(s.CreatedAt)
	s.RevokedAt = Millis(s.RevokedAt)
	if s.Mode == session.ModeExplicit {
		if s.Tools == nil {
			s.Tools = []string{}
		}
		s.Tools = slices.Clone(s.Tools)
		slices.Sort(s.Tools)
		s.Tools = slices.Compact(s.Tools)
	} else {
		s.Tools = nil
	}
	if rs, err := session.NormalizeRequirements(s.RequireApproval, nil); err == nil {
		s.RequireApproval = rs
	}
	return s
}

// SessionEvent returns a session event of type typ for s, by actor at at.
// Seq is left for the backend to assign.
func SessionEvent(s session.Session, typ approval.EventType, actor string, at time.Time) approval.Event {
	return approval.Event{SessionID: string(s.ID), Type: typ, Actor: actor, At: Millis(at)}
}

// SamePolicyOnly reports whether a and b are equal but for their policy
// fields (Mode, Tools, RequireApproval): what UpdateSession may change.
func SamePolicyOnly(a, b session.Session) bool {
	a.Mode, a.Tools, a.RequireApproval = "", nil, nil
	b.Mode, b.Tools, b.RequireApproval = "", nil, nil
	return reflect.DeepEqual(a, b)
}

// TxReads says what UpdateRequestReading reads inside its transaction,
// after the request's row is held.
type TxReads struct {
	// Chain asks for the requesting session's chain, as
	// UpdateRequestWithChain reads it.
	Chain bool
	// PolicyRevision asks for the newest deployment policy revision
	// number (0 when there is none; one indexed read). It is read under
	// the policy lock taken shared and held until the transaction ends,
	// which every writer of a revision (PolicyStore.AppendPolicy,
	// ApplyPolicyApproval) takes exclusively: a revision either committed
	// before the read, and is seen, or commits after this transaction.
	// So a write that checks the number it reads against the revision
	// its decision used commits only while that revision is the newest.
	PolicyRevision bool
}

// TxRead is what UpdateRequestReading read (the zero value of what
// TxReads did not ask for).
type TxRead struct {
	// Chain is the requesting session's chain, nil when the request is
	// not a session's.
	Chain session.Chain
	// PolicyRevision is the newest deployment policy revision number.
	PolicyRevision int64
}
