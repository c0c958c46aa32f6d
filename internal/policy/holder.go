package policy

import (
	"errors"
	"sync/atomic"
)

// errNoPolicy is returned by Holder.Evaluate when nothing has been stored.
var errNoPolicy = errors.New("policy: no policy loaded")

// A Holder holds the deployment policy in force and lets it be swapped at
// run time (a reload) while calls are being decided. Its methods are safe
// for concurrent use. A *Policy passed to NewHolder or Store must not be
// modified afterwards: readers use it without a lock.
type Holder struct {
	p atomic.Pointer[Policy]
}

// NewHolder returns a Holder holding p (which may be nil: Evaluate then
// denies every call).
func NewHolder(p *Policy) *Holder {
	h := &Holder{}
	h.p.Store(p)
	return h
}

// Load returns the policy in force, or nil if none was stored.
func (h *Holder) Load() *Policy { return h.p.Load() }

// Store puts p in force for every later Evaluate and Load.
func (h *Holder) Store(p *Policy) { h.p.Store(p) }

// Evaluate decides c with the policy in force (see [Policy.Evaluate]). With
// no policy it returns a Deny decision and an error, so callers fail closed.
func (h *Holder) Evaluate(c Call) (Decision, error) {
	p := h.p.Load()
	if p == nil {
		return Decision{Effect: Deny, Rule: DefaultRule}, errNoPolicy
	}
	return p.Evaluate(c)
}
