package gateway

import "net/http"

// A lean call's JSON answer (heartbeatWriter.answerJSON) is sent from
// within serveLean, before the call's cleanups (leanCleanups) and the
// returns through serve, ServeHTTP and net/http's end of the handler,
// which then run while the agent reads it (issue 13: at one call in
// flight a call's answer waited for all of them). Only the session's
// in-flight id is freed before it (freeID), as before: an agent that
// sends its next call with the same id once it has the answer is not
// refused as a duplicate. The bytes are net/http's as before: one write
// of the head with the Content-Length answerJSON set and the body, and
// nothing at the handler's end (no chunked encoding). An event stream's
// last event is left to the handler's end as before (a flush would send
// its terminating chunk in a second write).

// freeID frees the session's in-flight request id of the call now (see
// leanCleanups.untrackID) instead of with the other cleanups.
func (c *leanCleanups) freeID() {
	if c.untrackID != nil {
		c.untrackID()
		c.untrackID = nil
	}
}

// sendJSON sends the answer answerJSON wrote to the client now, when
// there is one; otherwise it does nothing.
func (h *heartbeatWriter) sendJSON() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.json {
		_ = http.NewResponseController(h.w).Flush()
	}
}
