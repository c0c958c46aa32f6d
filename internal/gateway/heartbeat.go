package gateway

import (
	"io"
	"mime"
	"net/http"
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
	wroteHeader bool        // guarded by mu
	stopped     bool        // guarded by mu
	timer       *time.Timer // guarded by mu; nil until armed
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
	h.wroteHeader = true
	h.w.WriteHeader(code)
}

func (h *heartbeatWriter) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.wroteHeader = true
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
	if media, _, _ := mime.ParseMediaType(h.w.Header().Get("Content-Type")); media != "text/event-stream" {
		return
	}
	if !h.wroteHeader {
		h.wroteHeader = true
		h.w.WriteHeader(http.StatusOK)
	}
	if _, err := io.WriteString(h.w, heartbeatComment); err != nil {
		return
	}
	if err := http.NewResponseController(h.w).Flush(); err != nil {
		return
	}
	h.timer.Reset(h.every)
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
