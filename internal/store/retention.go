package store

import "time"

// Retention says how long the store keeps what is over (config keys
// retention.requests, retention.events and retention.sessions). A zero
// duration keeps that kind of row forever. Prune never deletes a request
// that is not terminal (pending, approved, or consumed with no dispatch
// outcome), nor an event of such a request, nor a session that is not
// revoked.
type Retention struct {
	// Requests: a terminal request is deleted once it was created more
	// than Requests ago and none of its events is left (events go first,
	// see Events).
	Requests time.Duration
	// Events: events are deleted oldest first, as a prefix of the change
	// feed (Store.Feed order): the prefix ends before the first event that
	// is younger than Events or belongs to a request that is not terminal.
	// Deleting whole prefixes means a verifier of the log (the audit chain)
	// only needs to know where the kept part starts: Prune records the
	// position and time of the last event it deleted (Pruned.Through), and
	// Store.Feed readers never see a hole in the middle of the log.
	Events time.Duration
	// Sessions: a revoked session is deleted once it was revoked more than
	// Sessions ago, none of its events is left and it has no child left.
	Sessions time.Duration
}

// Pruned is what one Prune deleted.
type Pruned struct {
	Requests, Events, Sessions int
	// Through is the feed position of the last event deleted so far (by
	// this call or an earlier one; zero when none was ever deleted): every
	// event at or before it is gone, every event after it is kept.
	Through Cursor
}
