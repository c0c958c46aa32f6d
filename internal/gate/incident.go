package gate

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"toolgate/internal/session"
	"toolgate/internal/store"
	"toolgate/internal/telemetry"
)

// Store errors never reach an agent as they are: their text can name
// tables, files, hosts or SQL. An agent gets a stable message and an error
// id; the log line with the cause carries the same id (issue 9, item 11).

// An Incident is an internal failure (the store, an id source) behind an
// answer to an agent. Its Error text is public: a generic message with ID;
// Err, the cause, was logged under ID when the Incident was made, and is
// still reachable with errors.Is and errors.As.
type Incident struct {
	ID  string
	Err error
}

func (e *Incident) Error() string { return fmt.Sprintf("internal error (error id %s)", e.ID) }
func (e *Incident) Unwrap() error { return e.Err }

// newErrorID returns a short random id that ties an answer to its log line.
func newErrorID() string { return rand.Text()[:12] }

// incident logs err as msg (with attrs) under a new error id and returns
// the Incident to answer with.
func (g *Gate) incident(ctx context.Context, msg string, err error, attrs ...any) *Incident {
	in := &Incident{ID: newErrorID(), Err: err}
	g.metrics.StoreError(telemetry.StoreOpCall)
	g.log.ErrorContext(ctx, msg, append(attrs, "error_id", in.ID, "err", err)...)
	return in
}

// storeRefusal logs err (msg, attrs) under a new error id and returns the
// refusal an agent gets: public, the error id appended.
//
// When ctx was cancelled (the caller went away, or the gateway is
// closing) the failure is taken for that, not the store's: the refusal
// names the cause, with no incident, error log or store-error count
// (attack31: any agent dropping its held calls made false store
// incidents, and the audit trail's reason said the store was
// unavailable). A deadline that passed is still an incident: a store too
// slow for it is the store's failure.
func (g *Gate) storeRefusal(ctx context.Context, public, msg string, err error, attrs ...any) Admission {
	if errors.Is(ctx.Err(), context.Canceled) {
		cause := context.Cause(ctx)
		g.log.DebugContext(ctx, "the caller went away during the admission; refusing", append(attrs, "cause", cause, "err", err)...)
		return refuse(fmt.Sprintf("refused: %v; nothing was run", cause))
	}
	in := g.incident(ctx, msg, err, attrs...)
	return refuse(fmt.Sprintf("%s (error id %s)", public, in.ID))
}

// msgStoreUnavailable is what an agent reads when a gated call cannot be
// held because the store failed.
const msgStoreUnavailable = "denied: the approval store is unavailable, so the call cannot be held for approval"

// isPublicError reports whether err's text may be shown to the agent as it
// is: the refusals a caller can act on. Anything else (store failures,
// encoding errors) becomes an Incident.
func isPublicError(err error) bool {
	var widen *session.WidenError
	switch {
	case errors.As(err, &widen),
		errors.Is(err, ErrTooManyPolicyRequests), errors.Is(err, ErrNotOwnSession), errors.Is(err, ErrPolicyChanged),
		errors.Is(err, session.ErrCeiling), errors.Is(err, session.ErrEmptyChange), errors.Is(err, session.ErrBadRef),
		errors.Is(err, session.ErrRevoked), errors.Is(err, session.ErrUnknownServer), errors.Is(err, session.ErrWiden),
		errors.Is(err, session.ErrStaleRevision):
		return true
	case errors.Is(err, store.ErrNotFound):
		return !errors.Is(err, store.ErrUnavailable)
	}
	return false
}
