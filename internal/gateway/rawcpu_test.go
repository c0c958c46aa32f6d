package gateway

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// lineRecorder is the child's stdin of a rawCalls under test: it keeps the
// lines written.
type lineRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineRecorder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(bytes.TrimSuffix(p, []byte("\n"))))
	return len(p), nil
}

func (l *lineRecorder) last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == 0 {
		return ""
	}
	return l.lines[len(l.lines)-1]
}

// TestRawCallBounds: a raw stdio call is ended by call_timeout with
// errCallTimeout and by the gateway's shutdown with ErrShutdown, and the
// upstream is told with notifications/cancelled giving the reasons a
// timed-out and a cancelled context give (as when the call ran in
// callContext's context); a waiter reused after an answered call times out
// again at its own call_timeout, not earlier and not never.
func TestRawCallBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &lineRecorder{}
		r := newRawCalls(w, 1<<20, slog.New(slog.DiscardHandler))
		const timeout = 30 * time.Second
		b := rawBounds{shutdown: make(chan struct{}), timeout: timeout}

		// Answered calls first, so that the waiter (and its timer) of
		// the timed call below is a reused one.
		for i := uint64(1); i <= 3; i++ {
			done := make(chan error, 1)
			go func() {
				_, err := r.callBounded(t.Context(), b, "echo", nil, "", nil)
				done <- err
			}()
			synctest.Wait()
			r.deliver(i, rawAnswer{result: []byte(`{"content":[]}`)})
			if err := <-done; err != nil {
				t.Fatalf("answered call %d: %v", i, err)
			}
			time.Sleep(timeout / 2) // each armed timer stopped: none fires
		}

		start := time.Now()
		_, err := r.callBounded(t.Context(), b, "echo", nil, "", nil)
		if !errors.Is(err, errCallTimeout) {
			t.Fatalf("unanswered call: err %v, want errCallTimeout", err)
		}
		if d := time.Since(start); d != timeout {
			t.Errorf("unanswered call ended after %v, want call_timeout %v", d, timeout)
		}
		if got := w.last(); !strings.Contains(got, `"method":"notifications/cancelled"`) || !strings.Contains(got, `"requestId":"tg-4"`) ||
			!strings.Contains(got, `"reason":"`+context.DeadlineExceeded.Error()+`"`) {
			t.Errorf("after call_timeout the upstream got %s, want notifications/cancelled for tg-4 with reason %q", got, context.DeadlineExceeded)
		}

		shutdown := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			_, err := r.callBounded(t.Context(), rawBounds{shutdown: shutdown, timeout: timeout}, "echo", nil, "", nil)
			done <- err
		}()
		synctest.Wait()
		close(shutdown)
		if err := <-done; !errors.Is(err, ErrShutdown) {
			t.Fatalf("call during shutdown: err %v, want ErrShutdown", err)
		}
		if got := w.last(); !strings.Contains(got, `"requestId":"tg-5"`) || !strings.Contains(got, `"reason":"`+context.Canceled.Error()+`"`) {
			t.Errorf("after shutdown the upstream got %s, want notifications/cancelled for tg-5 with reason %q", got, context.Canceled)
		}
	})
}

// TestIDScannerAllocatesOnlyTheID: reading the id of a raw call's answer
// line (rawCalls.divert, every answer of a stdio upstream) allocates the
// id it keeps and nothing else: the current key and the id's bytes so far
// are kept in the scanner itself.
func TestIDScannerAllocatesOnlyTheID(t *testing.T) {
	line := []byte(`{"jsonrpc":"2.0","id":"tg-123456","result":{"content":[{"type":"text","text":"hello"}],"isError":false}}`)
	var s idScanner
	allocs := testing.AllocsPerRun(200, func() {
		s = idScanner{}
		s.feed(line)
	})
	if string(s.id) != `"tg-123456"` || s.method {
		t.Fatalf("scanned id %s (method %v), want \"tg-123456\" and no method", s.id, s.method)
	}
	if allocs > 1 {
		t.Errorf("%v allocations per answer line scanned, want at most 1 (the id kept)", allocs)
	}
}

// TestRawRequestLineAllocatesOnce: the tools/call line of a raw call is
// made in one allocation (it was sized 23 bytes short, so every line was
// copied into a second one while it was written).
func TestRawRequestLineAllocatesOnce(t *testing.T) {
	mk, err := rawRequestLine("echo", []byte(`{"message":"`+strings.Repeat("x", 100)+`"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	id := uint64(1<<64 - 1) // the longest id
	if allocs := testing.AllocsPerRun(100, func() { _ = mk.line(id) }); allocs > 1 {
		t.Errorf("%v allocations per tools/call line, want 1", allocs)
	}
	if line := string(mk.line(id)); !strings.HasPrefix(line, `{"jsonrpc":"2.0","id":"tg-18446744073709551615","method":"tools/call","params":{"name":"echo","arguments":{"message":"xx`) ||
		!strings.HasSuffix(line, `"}}}`+"\n") {
		t.Errorf("line %q", line)
	}
}

// TestStdioCallTimeout: on a stdio upstream (the raw path, rawOnce) a call
// that outlives call_timeout fails with the JSON-RPC error that names it,
// as on the SDK path, and the session serves the next call.
func TestStdioCallTimeout(t *testing.T) {
	sc := stdioServer("up")
	sc.Sessions = SessionsShared
	sc.CallTimeout = 100 * time.Millisecond
	g := newGateway(t, []ServerConfig{sc}, allowAll(), nil)
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)
	_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__sleep"})
	var wire *jsonrpc.Error
	if !errors.As(err, &wire) || wire.Code != CodeUpstreamTimeout || !strings.Contains(wire.Message, "call_timeout 100ms") {
		t.Fatalf("CallTool = %v, want a JSON-RPC error %d naming call_timeout 100ms", err, CodeUpstreamTimeout)
	}
	c, err := g.ups["up"].session()
	if err != nil {
		t.Fatal(err)
	}
	if n := c.raw.count(); n != 1 {
		t.Errorf("%d raw calls sent, want the one (the call did not go the raw way)", n)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Errorf("the next call: %v, %v", res, err)
	}
}
