// Package store defines the persistence contract for approval requests.
// Backends live in subpackages; storetest holds the conformance suite every
// backend must pass.
package store

import (
	"context"
	"errors"
	"time"

	"toolgate/internal/approval"
)

// Sentinel errors. Backends wrap them with %w; callers use errors.Is.
var (
	ErrNotFound      = errors.New("store: not found")
	ErrAlreadyExists = errors.New("store: already exists")
	// ErrUnavailable wraps failures to reach the database (connection refused,
	// closed pool, I/O errors) so callers can fail closed with a clear message.
	ErrUnavailable = errors.New("store: unavailable")
)

// Filter selects requests for ListRequests. Zero fields do not filter.
type Filter struct {
	State       approval.State
	RequestedBy string
	Tenant      string
	// IDPrefix matches ids starting with this text (CLI short ids).
	IDPrefix string
	// Limit caps the page size; 0 means 100. Cursor is the NextCursor of the
	// previous page ("" for the first). Pages are ordered by id ascending,
	// which is creation order for UUIDv7 ids.
	Limit  int
	Cursor string
}

// A Store persists approval requests and their event log. All methods are
// safe for concurrent use, including by several processes sharing one
// database. Times are stored in UTC with millisecond precision and come from
// the caller, never from the database clock. Arguments (the display copy) is
// stored byte for byte (not re-encoded, so key order is kept); nil and empty
// slices may come back either way.
type Store interface {
	// CreateRequest inserts r (which must be pending) and writes its
	// "requested" event in the same transaction. ErrAlreadyExists if the id is taken.
	CreateRequest(ctx context.Context, r approval.Request) error
	// GetRequest returns the request or ErrNotFound.
	GetRequest(ctx context.Context, id approval.ID) (approval.Request, error)
	// ListRequests returns one page and the cursor of the next ("" at the end).
	ListRequests(ctx context.Context, f Filter) (rs []approval.Request, next string, err error)
	// UpdateRequest runs fn on the current value inside one transaction that
	// holds the row (SQLite: an IMMEDIATE transaction; Postgres: SELECT … FOR
	// UPDATE), then stores the result and writes one event per change: a
	// "reviewed" event for each added review, and an event named after the new
	// state when the state changed (plus "dispatched" when DispatchOutcome was
	// set). If fn returns an error nothing is written and that error is
	// returned. fn may run more than once: it must have no side effects.
	// actor names who made the change, for the events; the events written
	// are exactly those of [ChangeEvents]. The returned value is what was
	// stored (see [Normalize]).
	UpdateRequest(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) error) (approval.Request, error)
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
	// CountPending counts pending requests, of one principal when
	// requestedBy is not empty.
	CountPending(ctx context.Context, requestedBy string) (int, error)
	// Events returns events with Seq > after, in Seq order, at most limit
	// (0 means 100).
	Events(ctx context.Context, after int64, limit int) ([]approval.Event, error)
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	Close() error
}

// Normalize returns r with every time in UTC truncated to the millisecond and
// ValidFor truncated to the millisecond: the precision every backend stores.
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

// ChangeEvents returns the events UpdateRequest writes for the change from
// before to after, in this order:
//
//   - one "reviewed" event per review appended to Reviews, at the review's At;
//   - when State changed, one event named after the new state, at DecidedAt
//     for approved/denied and ConsumedAt for consumed (when set), else now;
//   - "dispatched", at now, when DispatchOutcome went from "" to a value.
//
// Every event carries after.State (the state as committed) and actor. Seq is
// left for the backend to assign. Every backend uses this function, so they
// all write the same log.
func ChangeEvents(before, after approval.Request, actor string, now time.Time) []approval.Event {
	var evs []approval.Event
	ev := func(typ approval.EventType, at time.Time) {
		evs = append(evs, approval.Event{RequestID: after.ID, Type: typ, State: after.State, Actor: actor, At: Millis(at)})
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
