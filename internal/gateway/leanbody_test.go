package gateway

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// countingBody counts the reads of a request body.
type countingBody struct {
	r     io.Reader
	reads int
}

func (c *countingBody) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p)
}

func (c *countingBody) Close() error { return nil }

// The lean front's handlers share one read of a POST's body: asking again
// does not read the request, and the SDK path gets the same bytes back
// (followed by the read's error when there was one, as a too-large body).
func TestLeanBodyReadOnce(t *testing.T) {
	const msg = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`
	body := &countingBody{r: strings.NewReader(msg)}
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.Body, r.ContentLength = body, int64(len(msg))
	lb := &leanBody{w: httptest.NewRecorder(), r: r, max: 1 << 20}
	b1, err := lb.get()
	if err != nil || string(b1) != msg {
		t.Fatalf("get: %q, %v", b1, err)
	}
	reads := body.reads
	b2, err := lb.get()
	if err != nil || string(b2) != msg || body.reads != reads {
		t.Fatalf("second get: %q, %v, %d more reads of the request; want the same bytes and none", b2, err, body.reads-reads)
	}
	lb.restore()
	if got, err := io.ReadAll(r.Body); err != nil || string(got) != msg {
		t.Fatalf("restored body: %q, %v", got, err)
	}

	// Too large: the error stays, and the SDK path sees it after the bytes.
	r = httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(msg))
	r.ContentLength = -1
	lb = &leanBody{w: httptest.NewRecorder(), r: r, max: 10}
	_, err = lb.get()
	var mbe *http.MaxBytesError
	if !errors.As(err, &mbe) {
		t.Fatalf("get of a body over the limit: %v, want *http.MaxBytesError", err)
	}
	lb.restore()
	if got, err := io.ReadAll(r.Body); !errors.As(err, &mbe) || len(got) != 10 {
		t.Fatalf("restored body over the limit: %d bytes, %v; want 10 bytes and the MaxBytesError", len(got), err)
	}

	// Not read: nothing is put back.
	r = httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(msg))
	orig := r.Body
	(&leanBody{w: httptest.NewRecorder(), r: r, max: 1 << 20}).restore()
	if r.Body != orig {
		t.Error("restore replaced a body that was never read")
	}
}

// One call in flight on a session costs no map of its own; with more, each
// is tracked and cancelled, and untracking any of them leaves the others.
func TestSessionCallsOneCallAllocatesNoMap(t *testing.T) {
	s := newSessionCalls()
	noop := func(error) {}
	s.add("warm", "p", noop)() // the outer map's room for a session
	allocs := testing.AllocsPerRun(100, func() {
		s.add("warm", "p", noop)()
	})
	// The tracked call and the func that untracks it.
	if allocs > 2 {
		t.Errorf("%.1f allocations to track and untrack one call, want at most 2", allocs)
	}

	cancelled := map[string]int{}
	mk := func(name string) context.CancelCauseFunc {
		return func(error) { cancelled[name]++ }
	}
	untrackA := s.add("s1", "alice", mk("a"))
	untrackB := s.add("s1", "bob", mk("b"))
	s.add("s1", "alice", mk("c"))
	s.add("s2", "alice", mk("d"))
	untrackA() // the first call, kept outside the map
	s.cancel("s1", "alice", errors.New("x"))
	if cancelled["a"] != 0 || cancelled["b"] != 0 || cancelled["c"] != 1 || cancelled["d"] != 0 {
		t.Fatalf("cancel s1/alice: %v", cancelled)
	}
	s.cancelSession("s1", errors.New("x"))
	if cancelled["b"] != 1 || cancelled["c"] != 2 || cancelled["d"] != 0 {
		t.Fatalf("cancelSession s1: %v", cancelled)
	}
	untrackB()
	s.cancelAll(errors.New("x"))
	if cancelled["b"] != 1 || cancelled["c"] != 3 || cancelled["d"] != 1 {
		t.Fatalf("cancelAll: %v", cancelled)
	}
	s.mu.Lock()
	n := len(s.m)
	s.mu.Unlock()
	if n != 2 {
		t.Errorf("%d sessions tracked, want 2 (s1 with one call, s2)", n)
	}
}

// stopsAfter is a request body that gives its bytes and then fails with
// err, as a client that stops sending mid-body.
type stopsAfter struct {
	r   io.Reader
	err error
}

func (s *stopsAfter) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if errors.Is(err, io.EOF) {
		err = s.err
	}
	return n, err
}

func (s *stopsAfter) Close() error { return nil }

// A body shorter than its Content-Length (the client stopped sending) is
// the bytes that came, then the error, for the lean front and for the SDK
// path after restore. Before the fix the buffer made from Content-Length
// kept its zero bytes after the ones read: 100 bytes, 90 of them never sent.
func TestLeanBodyShorterThanContentLength(t *testing.T) {
	const sent = `{"jsonrpc":`
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.Body, r.ContentLength = &stopsAfter{r: strings.NewReader(sent), err: io.ErrUnexpectedEOF}, 100
	lb := &leanBody{w: httptest.NewRecorder(), r: r, max: 1 << 20}
	got, err := lb.get()
	if !errors.Is(err, io.ErrUnexpectedEOF) || string(got) != sent {
		t.Fatalf("get: %q, %v; want %q and io.ErrUnexpectedEOF", got, err, sent)
	}
	lb.restore()
	if got, err := io.ReadAll(r.Body); !errors.Is(err, io.ErrUnexpectedEOF) || string(got) != sent {
		t.Fatalf("restored body: %q, %v; want %q and io.ErrUnexpectedEOF", got, err, sent)
	}
}

// A Content-Length up to the limit (8 MiB by default) with no body behind
// it costs no buffer of that size: before the fix each such POST on a lean
// session allocated its whole Content-Length before a byte came, so a few
// dozen headers-only POSTs held the 200 MB of issue 13's held-call goal.
func TestLeanBodyContentLengthAloneAllocatesLittle(t *testing.T) {
	const claimed = 8 << 20
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.Body, r.ContentLength = &stopsAfter{r: strings.NewReader(""), err: io.ErrUnexpectedEOF}, claimed
	lb := &leanBody{w: httptest.NewRecorder(), r: r, max: claimed}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := lb.get()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("get: %v, want io.ErrUnexpectedEOF", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > claimed/8 {
		t.Fatalf("get of an empty body claiming %d bytes allocated %d bytes", claimed, n)
	}
}

// TestLeanBodyClosedOnceRead: a body read to its end (its Content-Length,
// or chunked to its last chunk) is closed, so net/http does not copy the
// rest of it away before the answer (issue 13: its discard copy ran for
// every lean call); one cut short by the limit is left to net/http.
func TestLeanBodyClosedOnceRead(t *testing.T) {
	const msg = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`
	for name, raw := range map[string]string{
		"content-length": "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(len(msg)) + "\r\n\r\n" + msg,
		"chunked":        "POST /mcp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + strconv.FormatInt(int64(len(msg)), 16) + "\r\n" + msg + "\r\n0\r\n\r\n",
	} {
		for _, limit := range []int64{1 << 20, 10} {
			r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
			if err != nil {
				t.Fatal(err)
			}
			lb := &leanBody{w: httptest.NewRecorder(), r: r, max: limit}
			body, err := lb.get()
			_, after := r.Body.Read(make([]byte, 1))
			if limit > int64(len(msg)) {
				if err != nil || string(body) != msg || !errors.Is(after, http.ErrBodyReadAfterClose) {
					t.Errorf("%s: body %q (%v), then a read gave %v; want the message, then %v", name, body, err, after, http.ErrBodyReadAfterClose)
				}
			} else if err == nil || errors.Is(after, http.ErrBodyReadAfterClose) {
				t.Errorf("%s over the limit: error %v, then a read gave %v; want the limit's error and the body left open", name, err, after)
			}
		}
	}
}
