package policy

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// errNoPolicy is returned by Holder.Evaluate when nothing has been stored.
var errNoPolicy = errors.New("policy: no policy loaded")

// A Holder holds the deployment policy in force, compiled ([Compile]), and
// lets it be swapped at run time (a reload) while calls are being decided.
// Its methods are safe for concurrent use. A *Policy passed to NewHolder or
// Store must not be modified afterwards: readers use it without a lock.
type Holder struct {
	cur     atomic.Pointer[held]
	onStore atomic.Pointer[func()]
}

// held is what a Holder holds: the policy, and its evaluator or why it did
// not compile.
type held struct {
	p   *Policy
	e   *Evaluator
	err error
}

// NewHolder returns a Holder holding p (which may be nil: Evaluate then
// denies every call).
func NewHolder(p *Policy) *Holder {
	h := &Holder{}
	h.Store(p)
	return h
}

// Load returns the policy in force, or nil if none was stored.
func (h *Holder) Load() *Policy {
	if c := h.cur.Load(); c != nil {
		return c.p
	}
	return nil
}

// Store compiles p and puts it in force for every later call. A policy that
// does not compile (callers validate first, so this is a bug) is in force
// too, and denies every call with the compile error: never the previous
// policy, never allow.
func (h *Holder) Store(p *Policy) {
	if p == nil {
		h.cur.Store(nil)
		return
	}
	e, err := Compile(p)
	if err != nil {
		err = fmt.Errorf("policy does not compile: %w", err)
	}
	h.cur.Store(&held{p: p, e: e, err: err})
	if f := h.onStore.Load(); f != nil {
		(*f)()
	}
}

// OnStore makes every later Store call f once the new policy is in force,
// for example to tell MCP clients that their tool lists may have changed.
// f must not call Store.
func (h *Holder) OnStore(f func()) { h.onStore.Store(&f) }

// Evaluator returns the compiled policy in force, or an error when there is
// none or it did not compile.
func (h *Holder) Evaluator() (*Evaluator, error) {
	c := h.cur.Load()
	switch {
	case c == nil:
		return nil, errNoPolicy
	case c.err != nil:
		return nil, c.err
	}
	return c.e, nil
}

// Revision returns the revision of the policy in force, "" when there is
// none. The gate compares it with Decision.Revision to reuse an earlier
// decision while the policy has not moved.
func (h *Holder) Revision() string {
	if c := h.cur.Load(); c != nil && c.e != nil {
		return c.e.Revision()
	}
	return ""
}

// Evaluate decides c with the policy in force (see [Evaluator.Evaluate]).
// With no policy, or one that did not compile, it returns a Deny decision
// and an error, so callers fail closed.
func (h *Holder) Evaluate(c Call) (Decision, error) {
	e, err := h.Evaluator()
	if err != nil {
		return Decision{Effect: Deny, Rule: DefaultRule}, err
	}
	return e.Evaluate(c)
}

// DeniedRegardless is [Evaluator.DeniedRegardless] on the policy in force;
// with none (or one that did not compile) everything is denied.
func (h *Holder) DeniedRegardless(c Call) (bool, string) {
	e, err := h.Evaluator()
	if err != nil {
		return true, DefaultRule
	}
	return e.DeniedRegardless(c)
}

// Listed reports whether a tools/list (or another list) shows the item c
// names to c's caller: always with policy.list_denied, else unless the
// policy in force denies it whatever the arguments. With no policy (or one
// that did not compile) nothing is listed.
func (h *Holder) Listed(c Call) bool {
	e, err := h.Evaluator()
	if err != nil {
		return false
	}
	return e.Listed(c)
}

// Explain is [Evaluator.Explain] on the policy in force.
func (h *Holder) Explain(c Call) (Explanation, error) {
	e, err := h.Evaluator()
	if err != nil {
		return Explanation{}, err
	}
	return e.Explain(c), nil
}
