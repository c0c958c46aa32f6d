package store

import (
	"context"
	"time"
)

// DueTimes says when a sweeper next has work, as of one read of the store
// (DueTimer.NextDue).
type DueTimes struct {
	// Requests is the earliest time a pending request expires or an
	// approved one's validity ends (the first two kinds of Due); zero
	// when there is neither.
	Requests time.Time
	// Dispatching reports a consumed request without a dispatch outcome
	// held by some instance (Due's third kind). Its effective lease moves
	// with its instance's renewals, which write no events, so a sweeper
	// that sees one looks every interval rather than at a time.
	Dispatching bool
	// Ledger is the earliest expiry in the result ledger (results, tasks,
	// used request states: PruneLedger); zero when it is empty.
	Ledger time.Time
}

// A DueTimer tells a sweeper when it next has work, so that an idle
// process need not ask the store every interval (gate.Run). A store
// that does not implement it is swept every interval.
type DueTimer interface {
	NextDue(ctx context.Context) (DueTimes, error)
}
