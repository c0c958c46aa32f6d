package gateway

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// heartbeatComment is an SSE comment: clients ignore it, but it sends the
// response headers and keeps intermediaries' idle timers from firing.
const heartbeatComment = ": hb\n\n"

// A heartbeatWriter wraps the ResponseWriter of a POST. The SDK writes
// nothing, not even headers, until a call's first event (notes §4), so a
// held call with no progress token is silent for minutes and clients with a
// header timeout give up. Once armed (by the call, after the SDK has set the
// response headers), it writes heartbeatComment after first of silence and
// then after every period of silence, as long as the response is an event
// stream. All writes, the SDK's and its own, are serialized by mu.
type heartbeatWriter struct {
	w            http.ResponseWriter
	first, every time.Duration

	// armOnWrite arms the heartbeat at the first write (used for the
	// standalone GET stream, whose headers are set before it).
	armOnWrite bool

	mu          sync.Mutex
	wroteHeader bool // guarded by mu
	// undecided is set (deferStream) while a lean call's answer may still
	// go as one JSON body: nothing of the response is written and its
	// headers are not set. The first write decides: the call's own answer
	// alone (answerJSON) goes as application/json; anything else (a
	// heartbeat, a log message, a question, WriteHeader, a flush) starts
	// the event stream (startLeanStream) first. Guarded by mu.
	undecided bool
	stopped   bool        // guarded by mu
	timer     *time.Timer // guarded by mu; nil until armed
	// stream is whether the response is an event stream, as its header
	// said when it was written (wroteHeader): the heartbeats after it need
	// not look at the header again (a parked stream keeps none once it
	// went out: leanstream.go). Guarded by mu.
	stream bool
	// json is whether the answer went as the whole response, as
	// application/json (answerJSON): sendJSON may send it before the
	// handler returns. Guarded by mu.
	json bool
	// jsonHeader holds answerJSON's three header values (Cache-Control,
	// Content-Type, Content-Length), which the response's header map
	// refers to: they come with the writer, no allocation of their own
	// (issue 13).
	jsonHeader [3]string
}

func newHeartbeatWriter(w http.ResponseWriter, first, every time.Duration) *heartbeatWriter {
	return &heartbeatWriter{w: w, first: first, every: every}
}

func (h *heartbeatWriter) Header() http.Header { return h.w.Header() }

func (h *heartbeatWriter) WriteHeader(code int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.wroteHeader {
		return // a heartbeat already sent the headers (200)
	}
	if h.undecided && h.w.Header().Get("Content-Type") == "" {
		h.decideStream()
	}
	h.undecided = false
	h.wroteHeader, h.stream = true, isEventStream(h.w.Header())
	h.w.WriteHeader(code)
}

func (h *heartbeatWriter) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.undecided {
		h.decideStream()
	}
	if !h.wroteHeader {
		h.wroteHeader, h.stream = true, isEventStream(h.w.Header())
	}
	n, err := h.w.Write(p)
	switch {
	case h.stopped:
	case h.timer != nil:
		h.timer.Reset(h.every)
	case h.armOnWrite:
		h.timer = time.AfterFunc(h.every, h.beat)
	}
	return n, err
}

// FlushError flushes the underlying writer; http.ResponseController uses it.
func (h *heartbeatWriter) FlushError() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.undecided {
		h.decideStream()
	}
	return http.NewResponseController(h.w).Flush()
}

// Flush implements http.Flusher.
func (h *heartbeatWriter) Flush() { _ = h.FlushError() }

// Unwrap gives http.ResponseController the underlying writer.
func (h *heartbeatWriter) Unwrap() http.ResponseWriter { return h.w }

// arm starts the heartbeat. The caller must be ordered after the SDK set
// the response headers: a tools/call handler is, since the SDK publishes
// the request only after setting them.
func (h *heartbeatWriter) arm() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.timer != nil || h.stopped {
		return
	}
	h.timer = time.AfterFunc(h.first, h.beat)
}

func (h *heartbeatWriter) beat() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	if h.undecided {
		h.decideStream()
	}
	if !h.wroteHeader {
		if !isEventStream(h.w.Header()) {
			return
		}
		h.wroteHeader, h.stream = true, true
		h.w.WriteHeader(http.StatusOK)
	} else if !h.stream {
		return
	}
	if _, err := io.WriteString(h.w, heartbeatComment); err != nil {
		return
	}
	if err := http.NewResponseController(h.w).Flush(); err != nil {
		return
	}
	h.timer.Reset(h.every)
}

// isEventStream reports whether h's Content-Type is an event stream's
// (its media type, without parameters, case aside), without allocating:
// every lean response asks it once.
func isEventStream(h http.Header) bool {
	media, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	return strings.EqualFold(strings.TrimSpace(media), "text/event-stream")
}

// deferStream leaves the response undecided (see undecided): its headers
// are set by the first write, as an event stream's or, for the call's
// answer alone, a JSON body's (answerJSON). Called before anything is
// written, in place of startLeanStream.
func (h *heartbeatWriter) deferStream() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.wroteHeader {
		h.undecided = true
	}
}

// decideStream makes the undecided response an event stream, as the lean
// front answered every call before: mu held.
func (h *heartbeatWriter) decideStream() {
	h.undecided = false
	startLeanStream(h.w)
}

// answerJSON writes msg, a call's one JSON-RPC response, as the whole
// response with Content-Type application/json and its Content-Length, as
// the SDK's handler answers with StreamableHTTPOptions.JSONResponse, when
// the response is still undecided; nothing is written after it (the
// heartbeat stops). It reports false, having written nothing, when the
// response is an event stream already (or was never deferred): the caller
// writes msg as the stream's last event.
func (h *heartbeatWriter) answerJSON(msg []byte) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.undecided || h.wroteHeader {
		return false
	}
	h.undecided = false
	// As Header.Set sets them (the keys are canonical), the three values
	// in the writer's own array (issue 13: Set makes a list per value).
	v := h.jsonHeader[:]
	v[0], v[1], v[2] = "no-cache, no-transform", "application/json", strconv.Itoa(len(msg))
	hd := h.w.Header()
	hd["Cache-Control"], hd["Content-Type"], hd["Content-Length"] = v[0:1:1], v[1:2:2], v[2:3:3]
	h.wroteHeader = true
	h.stopped = true
	h.json = true
	if h.timer != nil {
		h.timer.Stop()
	}
	_, _ = h.w.Write(msg) //nolint:gosec // G705: a JSON-RPC response served as application/json, never HTML
	return true
}

// stop ends the heartbeat; the handler calls it before returning, so
// nothing is written after.
func (h *heartbeatWriter) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	if h.timer != nil {
		h.timer.Stop()
	}
}
