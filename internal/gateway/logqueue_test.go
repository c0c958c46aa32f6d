package gateway

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// blockedWriter is a ResponseWriter whose first write blocks until release
// is closed: a caller that does not read its event stream.
type blockedWriter struct {
	httptest.ResponseRecorder
	writing chan struct{} // closed when the first write starts
	release chan struct{}
}

func (w *blockedWriter) Write(b []byte) (int, error) {
	select {
	case <-w.writing:
	default:
		close(w.writing)
	}
	<-w.release
	return len(b), nil
}

// TestLogQueueBoundedInBytes (fixes20): the queue of an upstream's log
// messages for one request was bounded by count only (relayQueue), each
// message up to limits.max_result_bytes: a caller that reads slowly made
// toolgate hold 256 of them. It is now bounded in bytes as the progress
// queue is (TestProgressQueueBoundedInBytes), and the warning says both
// bounds.
func TestLogQueueBoundedInBytes(t *testing.T) {
	w := &blockedWriter{writing: make(chan struct{}), release: make(chan struct{})}
	var logs logBuffer
	o := &origin{ss: &mcp.ServerSession{}, ctx: t.Context(), log: logs.logger()}
	o.lean = &leanLog{w: w, level: func() (mcp.LoggingLevel, bool) { return "debug", true }}
	u := &upstream{log: slog.New(slog.DiscardHandler)}
	route := func(i int, data string) {
		u.routeLog(t.Context(), o, nil, json.RawMessage(fmt.Sprintf(`{"level":"info","data":%q,"logger":"%d"}`, data, i)))
	}
	route(0, "first") // its write blocks: everything after waits
	<-w.writing
	msg := strings.Repeat("m", 64<<10)
	const sent = 64 // 4 MiB of messages
	for i := range sent {
		route(i+1, msg)
	}
	o.logs.mu.Lock()
	waiting := len(o.logs.q)
	o.logs.mu.Unlock()
	if held := waiting * len(msg); held > relayQueueBytes+len(msg) {
		t.Errorf("%d log messages (%d bytes) wait for a caller that does not read, want at most %d bytes", waiting, held, relayQueueBytes)
	}
	close(w.release)
	o.finish()
	if want := fmt.Sprintf("dropped=%d queue=%d queue_bytes=%d", sent-waiting, relayQueue, relayQueueBytes); !strings.Contains(logs.String(), want) {
		t.Errorf("log:\n%s\nwant the relay queue full warning with %q", logs.String(), want)
	}
}

// TestLogQueueHoldsWireBytes (attack21): the log messages waiting for a
// caller that does not read hold about the bytes relayQueueBytes counts,
// not their data decoded: decoded into Go values (any) a message of empty
// objects held about twenty times its wire bytes, so the 1 MiB bound
// held 20 MiB per request. A message's data now waits as the upstream
// sent it, and goes to the agent as such.
func TestLogQueueHoldsWireBytes(t *testing.T) {
	w := &blockedWriter{writing: make(chan struct{}), release: make(chan struct{})}
	o := &origin{ss: &mcp.ServerSession{}, ctx: t.Context(), log: slog.New(slog.DiscardHandler)}
	o.lean = &leanLog{w: w, level: func() (mcp.LoggingLevel, bool) { return "debug", true }}
	u := &upstream{log: slog.New(slog.DiscardHandler)}
	u.routeLog(t.Context(), o, nil, json.RawMessage(`{"level":"info","data":"first"}`)) // its write blocks
	<-w.writing
	// Six messages of empty objects, 384 KiB in all (within the bound).
	const each = 64 << 10
	msg := json.RawMessage(`{"level":"info","data":[` + strings.Repeat(`{},`, each/3) + `{}]}`)
	before := heapInUse()
	for range 6 {
		u.routeLog(t.Context(), o, nil, msg)
	}
	held := int64(heapInUse()) - int64(before) //nolint:gosec // heaps' sizes fit
	o.logs.mu.Lock()
	waiting := len(o.logs.q)
	o.logs.mu.Unlock()
	close(w.release)
	o.finish()
	if waiting == 0 {
		t.Fatal("no message waits")
	}
	t.Logf("%d waiting, %d bytes on the wire, %d bytes held", waiting, waiting*len(msg), held)
	if wire := waiting * len(msg); held > 4*int64(wire) {
		t.Errorf("%d log messages of %d bytes on the wire wait holding %d bytes, want at most %d (four times their wire bytes)",
			waiting, wire, held, 4*wire)
	}
}
