package gateway

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// leanSessions is what the HTTP front knows of the agents' 2025-era MCP
// sessions so that it can answer a plain tools/call without the SDK
// (leanfront.go): the session, the principal it is bound to, the protocol
// version it negotiated, whether it finished initialization, the lean
// calls in flight by JSON-RPC id, and its idle timer. The SDK's own idle
// timer only sees the POSTs it serves, so with the lean front on the front
// keeps the timer of every session (HTTPOptions.SessionTimeout) and the
// SDK keeps none. Its methods are safe for concurrent use.
type leanSessions struct {
	idle time.Duration // 0: sessions never expire
	mu   sync.Mutex
	m    map[string]*leanSession // guarded by mu: by Mcp-Session-Id
}

// A leanSession is one agent session as the front knows it.
type leanSession struct {
	ss        *mcp.ServerSession
	principal string // the principal ID the session is bound to
	version   string // the negotiated protocol version

	mu          sync.Mutex
	initialized bool                               // guarded by mu: notifications/initialized arrived
	inFlight    map[string]context.CancelCauseFunc // guarded by mu: lean calls by canonical id
	active      int                                // guarded by mu: requests in flight
	timer       *time.Timer                        // guarded by mu; nil without an idle timeout or once ended
	asks        map[string]chan leanReply          // guarded by mu: questions on lean calls' streams by id (leanask.go)
	asksEnded   bool                               // guarded by mu: the session ended; no more questions
}

func newLeanSessions(idle time.Duration) *leanSessions {
	return &leanSessions{idle: idle, m: map[string]*leanSession{}}
}

// add registers ss, bound to principal with the negotiated version, and
// starts its idle timer, which closes ss. A session added already keeps
// its entry (a second initialize on it changes nothing here).
func (l *leanSessions) add(ss *mcp.ServerSession, principal, version string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur := l.m[ss.ID()]; cur != nil && cur.ss == ss {
		return
	}
	l.m[ss.ID()] = newLeanSession(ss, principal, version, l.idle, func() {
		// Forgotten first: no request after the expiry is served lean.
		l.forget(ss)
		_ = ss.Close()
	})
}

// deleteWriter is the ResponseWriter of a DELETE of lean session ss. The
// SDK closes the session before it answers 204; the front forgets ss
// before that answer goes out, so no request the client sends after it is
// served lean (the gateway's watcher learns of the end only after closing
// the session's per-agent upstream sessions).
type deleteWriter struct {
	http.ResponseWriter
	lean *leanSessions
	ss   *mcp.ServerSession
}

func (w *deleteWriter) WriteHeader(code int) {
	if code == http.StatusNoContent {
		w.lean.forget(w.ss)
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap is for http.ResponseController.
func (w *deleteWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// newLeanSession is the entry of ss; after idle (0: never) without a
// request in flight, expire is called.
func newLeanSession(ss *mcp.ServerSession, principal, version string, idle time.Duration, expire func()) *leanSession {
	s := &leanSession{ss: ss, principal: principal, version: version, inFlight: map[string]context.CancelCauseFunc{}}
	if idle > 0 {
		s.timer = time.AfterFunc(idle, expire)
	}
	return s
}

// get returns the session with id sid, or nil.
func (l *leanSessions) get(sid string) *leanSession {
	if l == nil || sid == "" {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[sid]
}

// forget drops ss (it ended) and stops its timer.
func (l *leanSessions) forget(ss *mcp.ServerSession) {
	if l == nil {
		return
	}
	l.mu.Lock()
	s := l.m[ss.ID()]
	if s != nil && s.ss == ss {
		delete(l.m, ss.ID())
	}
	l.mu.Unlock()
	if s != nil {
		s.endAsks()
		s.mu.Lock()
		if s.timer != nil {
			s.timer.Stop()
			s.timer = nil
		}
		s.mu.Unlock()
	}
}

// markInitialized records that the agent sent notifications/initialized.
func (s *leanSession) markInitialized() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.initialized = true
}

func (s *leanSession) isInitialized() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.initialized
}

// start pauses the idle timer while a request of the session is served;
// call the returned func when it ends (the timer then starts again once no
// request is left), as the SDK's timer does for POSTs.
func (s *leanSession) start(idle time.Duration) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active++
	if s.timer != nil {
		s.timer.Stop()
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.active--; s.active == 0 && s.timer != nil {
			s.timer.Reset(idle)
		}
	}
}

// track records a lean call with canonical id in flight; ok is false when
// a lean call with that id is in flight already. untrack undoes it.
func (s *leanSession) track(id string, cancel context.CancelCauseFunc) (untrack func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.inFlight[id]; dup {
		return nil, false
	}
	s.inFlight[id] = cancel
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.inFlight, id)
	}, true
}

// cancel cancels the lean call with canonical id with cause; false when
// none is in flight.
func (s *leanSession) cancel(id string, cause error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.inFlight[id]
	if ok {
		c(cause)
	}
	return ok
}
