package store

import (
	"errors"
	"fmt"
)

// ErrCapReached is wrapped by the *CapError with which CreateRequest
// refuses a request over a cap.
var ErrCapReached = errors.New("store: pending cap reached")

// CapScope says which pending requests a Cap counts.
type CapScope int

const (
	// CapPrincipal counts the pending tool-call requests (kind "" or
	// tool_call) of one principal: Key is its id.
	CapPrincipal CapScope = iota + 1
	// CapSessionTree counts the pending tool-call requests of every session
	// in the tree below a root session, root included and revoked sessions
	// too (as CountPendingInTree): Key is the root's id.
	CapSessionTree
	// CapTotal counts every pending tool-call request; Key is unused.
	CapTotal
	// CapPolicyRequests counts the pending session_policy requests that
	// target one session and have not expired as of the new request's
	// CreatedAt (an overdue one the sweeper has not reached yet does not
	// count): Key is the session id.
	CapPolicyRequests
)

func (s CapScope) String() string {
	switch s {
	case CapPrincipal:
		return "principal"
	case CapSessionTree:
		return "session tree"
	case CapTotal:
		return "total"
	case CapPolicyRequests:
		return "policy requests"
	}
	return fmt.Sprintf("CapScope(%d)", int(s))
}

// A Cap bounds how many requests of a scope may be pending: CreateRequest
// refuses a new request when Limit of them already are. Caps are checked in
// the creating transaction; see Store.CreateRequest.
type Cap struct {
	Scope CapScope
	Key   string
	Limit int
	// Name is the setting the cap comes from (for example
	// "approvals.max_pending_per_principal"); CapError names it.
	Name string
}

// CapError is the refusal of a request over a cap: Pending requests of
// Cap's scope were pending (at least Cap.Limit). It wraps ErrCapReached.
type CapError struct {
	Cap     Cap
	Pending int
}

func (e *CapError) Error() string {
	return fmt.Sprintf("%d requests are already pending (%s, the limit is %d)", e.Pending, e.Cap.Name, e.Cap.Limit)
}

func (e *CapError) Unwrap() error { return ErrCapReached }
