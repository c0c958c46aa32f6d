package gateway

import (
	"context"
	"sync"
)

// The calls in flight per agent session, for cancelling them.

// sessionCalls tracks the calls in flight per agent session, so a DELETE of
// the session, the end of ServeStdio or Close cancels them (the SDK would
// wait for them; notes §3).
type sessionCalls struct {
	mu sync.Mutex
	m  map[string]callSet // guarded by mu; by session id
}

// A callSet is the calls of one session: one call in flight (nearly
// always) needs no map of its own.
type callSet struct {
	one  *trackedCall              // nil when more holds them all
	more map[*trackedCall]struct{} // the others; nil until a second call
}

type trackedCall struct {
	principal string
	cancel    context.CancelCauseFunc
}

func newSessionCalls() *sessionCalls {
	return &sessionCalls{m: map[string]callSet{}}
}

// add tracks a call of principal on session sid; the returned func untracks it.
func (s *sessionCalls) add(sid, principal string, cancel context.CancelCauseFunc) func() {
	tc := &trackedCall{principal: principal, cancel: cancel}
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.m[sid]
	switch {
	case cs.one == nil && len(cs.more) == 0:
		cs.one = tc
	default:
		if cs.more == nil {
			cs.more = map[*trackedCall]struct{}{}
		}
		cs.more[tc] = struct{}{}
	}
	s.m[sid] = cs
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		cs := s.m[sid]
		if cs.one == tc {
			cs.one = nil
		} else {
			delete(cs.more, tc)
		}
		if cs.one == nil && len(cs.more) == 0 {
			delete(s.m, sid)
			return
		}
		s.m[sid] = cs
	}
}

// each calls fn for each call of cs.
func (cs callSet) each(fn func(*trackedCall)) {
	if cs.one != nil {
		fn(cs.one)
	}
	for tc := range cs.more {
		fn(tc)
	}
}

// cancel cancels, with cause, the calls of principal on session sid.
func (s *sessionCalls) cancel(sid, principal string, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[sid].each(func(tc *trackedCall) {
		if tc.principal == principal {
			tc.cancel(cause)
		}
	})
}

// cancelSession cancels, with cause, every call on session sid.
func (s *sessionCalls) cancelSession(sid string, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[sid].each(func(tc *trackedCall) { tc.cancel(cause) })
}

// cancelAll cancels, with cause, every call in flight.
func (s *sessionCalls) cancelAll(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cs := range s.m {
		cs.each(func(tc *trackedCall) { tc.cancel(cause) })
	}
}

// count returns how many calls are in flight.
func (s *sessionCalls) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, cs := range s.m {
		cs.each(func(*trackedCall) { n++ })
	}
	return n
}
