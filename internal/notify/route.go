package notify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"toolgate/internal/approval"
)

// A Channel delivers messages to one receiver. Deliver must be safe for
// concurrent use. It returns the reference of the message it made or
// updated (for example a Slack channel and ts) for the outbox to keep for
// the request, or "" to keep the previous one. An error means the attempt
// failed: the outbox retries it (see [RetryAfter] and [Permanent]). Error
// texts are logged and stored, so they must never hold a secret: no URL,
// token or response body.
type Channel interface {
	Deliver(ctx context.Context, m Message) (ref string, err error)
}

// Message is one event to announce, as a Channel receives it.
type Message struct {
	// EventID is the id receivers deduplicate by: the same on every
	// attempt and on every channel announcing the event.
	EventID string
	// Event is the event: Seq, RequestID, Type, State (as the event
	// committed it), Actor and At.
	Event approval.Event
	// Request is the request as stored when the attempt started (it may
	// have moved on since the event: Event.State says what the event was).
	Request approval.Request
	// Channel is the name of the channel (a Route's Name).
	Channel string
	// Attempt counts from 1.
	Attempt int
	// Ref is the reference this channel returned for an earlier event of
	// the same request, or "".
	Ref string
}

// Event names of a Route's Events, as in the config key
// notify.channels[].events. Each is the approval event type of the same
// name, except Decided, which stands for approved and denied, and
// DispatchFailed, which stands for the dispatched events whose outcome is
// not ok (tool_error, transport_error, cancelled_after_dispatch, unknown):
// the call was approved and did not run as asked, or toolgate cannot say
// whether it ran.
const (
	Requested   = "requested"
	Reviewed    = "reviewed"
	Approved    = "approved"
	Denied      = "denied"
	Decided     = "decided"
	Expired     = "expired"
	Cancelled   = "cancelled"
	Consumed    = "consumed"
	Invalidated = "invalidated"
	Dispatched  = "dispatched"

	DispatchFailed = "dispatch_failed"
)

// eventTypes maps the event names to the approval event types they select.
var eventTypes = map[string][]approval.EventType{
	Requested:   {approval.EventRequested},
	Reviewed:    {approval.EventReviewed},
	Approved:    {approval.EventApproved},
	Denied:      {approval.EventDenied},
	Decided:     {approval.EventApproved, approval.EventDenied},
	Expired:     {approval.EventExpired},
	Cancelled:   {approval.EventCancelled},
	Consumed:    {approval.EventConsumed},
	Invalidated: {approval.EventInvalidated},
	Dispatched:  {approval.EventDispatched},
	// DispatchFailed selects EventDispatched only when the outcome is not
	// ok (route.selects filters it).
	DispatchFailed: {approval.EventDispatched},
}

// A Route is a named channel and what it announces.
type Route struct {
	// Name names the channel in metrics, logs and the store; unique.
	Name    string
	Channel Channel
	// Events are event names (Requested, Decided, …); at least one.
	Events []string
	// Rules and Servers, when not empty, restrict the route to requests
	// whose Rule, and whose Server, is listed.
	Rules   []string
	Servers []string
	// MaxAge is how long after its event a delivery is attempted; then it
	// counts as failed. An event already older when the outbox first sees
	// it is not announced (counted as skipped). Must be > 0.
	MaxAge time.Duration
}

// route is a Route with its event names resolved.
type route struct {
	Route
	types []approval.EventType
	// failedOnly: the route announces dispatched events only when their
	// outcome is not ok (it lists DispatchFailed, not Dispatched).
	failedOnly bool
}

func newRoute(r Route) (route, error) {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("channel %q: "+format, append([]any{r.Name}, args...)...))
	}
	if r.Name == "" {
		add("empty name")
	}
	if r.Channel == nil {
		add("no channel")
	}
	if r.MaxAge <= 0 {
		add("max age %v: must be > 0", r.MaxAge)
	}
	if len(r.Events) == 0 {
		add("no events")
	}
	out := route{Route: r}
	for _, e := range r.Events {
		ts, ok := eventTypes[e]
		if !ok {
			add("unknown event %q", e)
		}
		for _, t := range ts {
			if !slices.Contains(out.types, t) {
				out.types = append(out.types, t)
			}
		}
	}
	out.failedOnly = slices.Contains(r.Events, DispatchFailed) && !slices.Contains(r.Events, Dispatched)
	if err := errors.Join(errs...); err != nil {
		return route{}, err
	}
	return out, nil
}

// selects reports whether the route announces ev about r, ignoring age. r
// is the request as stored when the event is fanned out; a dispatched
// event is written in the transaction that records the outcome, which
// never changes after, so r's outcome is the event's.
//
// A reviewed event that settled its request (its State is approved or
// denied: the review that reached the quorum, or a deny) is not announced
// by a route that announces the approved or denied event it came with:
// that event says the same, and the route sends one message, not two.
// Reviews that leave the request pending (1 of 2 approvals) are announced.
func (rt *route) selects(ev approval.Event, r approval.Request) bool {
	if rt.failedOnly && ev.Type == approval.EventDispatched && r.DispatchOutcome == approval.OutcomeOK {
		return false
	}
	if ev.Type == approval.EventReviewed && (ev.State == approval.StateApproved && slices.Contains(rt.types, approval.EventApproved) ||
		ev.State == approval.StateDenied && slices.Contains(rt.types, approval.EventDenied)) {
		return false
	}
	return slices.Contains(rt.types, ev.Type) &&
		(len(rt.Rules) == 0 || slices.Contains(rt.Rules, r.Rule)) &&
		(len(rt.Servers) == 0 || slices.Contains(rt.Servers, r.Server))
}

// RetryAfter wraps err to ask for the next attempt no sooner than after
// (an HTTP 429 or 503 with a Retry-After header); the backoff still
// applies when it is longer.
func RetryAfter(err error, after time.Duration) error {
	return &retryAfterError{err: err, after: after}
}

type retryAfterError struct {
	err   error
	after time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfterOf returns the wait a [RetryAfter] error in err's chain asks
// for.
func RetryAfterOf(err error) (time.Duration, bool) {
	var ra *retryAfterError
	if errors.As(err, &ra) {
		return ra.after, true
	}
	return 0, false
}

// Refused wraps err to say that the receiver refused the sender itself
// (an HTTP 401 or 403: a wrong secret or token, a configuration error
// rather than an outage). It is retried like any failed attempt; the
// outbox logs it at WARN, once per channel per [RefusedWarnEvery], where
// other retries are INFO.
func Refused(err error) error { return &refusedError{err} }

type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// IsRefused reports whether err's chain holds a [Refused] error.
func IsRefused(err error) bool {
	var r *refusedError
	return errors.As(err, &r)
}

// RefusedWarnEvery is how often, at most, the outbox logs at WARN that a
// channel's receiver refused it (Refused); the attempts in between are
// logged at INFO.
const RefusedWarnEvery = 10 * time.Minute

// IsPermanent reports whether err's chain holds a [Permanent] error.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// Permanent wraps err to say that no later attempt can succeed: the
// delivery fails at once.
func Permanent(err error) error { return &permanentError{err} }

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }
