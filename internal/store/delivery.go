package store

import (
	"time"

	"toolgate/internal/approval"
)

// DeliveryState is where a Delivery stands.
type DeliveryState string

const (
	// DeliveryPending: not delivered yet; attempted when due (NextAt) and
	// not leased.
	DeliveryPending DeliveryState = "pending"
	// DeliveryDelivered: a receiver accepted it. Final.
	DeliveryDelivered DeliveryState = "delivered"
	// DeliveryFailed: every attempt until the channel's max_age failed.
	// Final.
	DeliveryFailed DeliveryState = "failed"
)

// A Delivery is one announcement of one approval event on one notification
// channel: a row of the notification outbox (issue 14). Deliveries are made
// from the event log by the store's FanOut, claimed by one gateway
// instance at a time with a lease, and finished with an outcome.
type Delivery struct {
	ID int64
	// EventID is the id receivers deduplicate by: the same on every
	// attempt, and for every channel announcing the same event.
	EventID string
	// Event is the event announced: its Seq, RequestID, Type, State (the
	// request's state as the event committed it), Actor and At.
	Event   approval.Event
	Channel string
	State   DeliveryState
	// Attempts counts the attempts started, including one under way.
	Attempts int
	// NextAt is the earliest time of the next attempt.
	NextAt time.Time
	// LeaseOwner and LeaseUntil name the instance attempting the delivery
	// and until when; zero when nobody holds it.
	LeaseOwner string
	LeaseUntil time.Time
	// DoneAt is when it was delivered or given up; zero while pending.
	DoneAt time.Time
	// LastError describes the last failed attempt (never a secret: no
	// URL, token or response body).
	LastError string
}

// DeliveryResult is the outcome of one attempt, as the attempting
// instance records it.
type DeliveryResult struct {
	// State is DeliveryDelivered, DeliveryFailed (given up), or
	// DeliveryPending to try again at NextAt.
	State  DeliveryState
	NextAt time.Time
	// At is when the attempt ended: DoneAt of a final result.
	At time.Time
	// Error describes a failure; kept as LastError.
	Error string
	// Ref, when not empty, is the channel's message for the request (for
	// example a Slack channel and ts), kept so later events on the same
	// channel can update it: stored in the same transaction.
	Ref string
}

// FanOutResult says what one FanOut did.
type FanOutResult struct {
	// Events is how many events were read past the cursor (the cursor
	// moved past all of them); Deliveries how many rows were made.
	Events     int
	Deliveries int
	// More is true when the batch was full: more events may be waiting.
	More bool
}
