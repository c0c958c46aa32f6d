package gateway

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// A tokenStream is one raw client's held call with a progress token: the
// lines of its response's body as they come.
type tokenStream struct {
	conn net.Conn
	sc   *bufio.Scanner
	body io.Closer
}

// openTokenStream reads the head of c's response and returns its body's
// lines. Reads of c give up near the test's deadline (nearDeadline): a
// keep-alive or an answer that never comes fails the test with a message.
func openTokenStream(t *testing.T, c net.Conn) *tokenStream {
	t.Helper()
	if err := c.SetReadDeadline(nearDeadline(t)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil) //nolint:bodyclose // closed by rest, else at the test's end
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("held call's response: %d %q, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return &tokenStream{conn: c, sc: bufio.NewScanner(resp.Body), body: resp.Body}
}

// keepAlives reads until n keep-alives came.
func (s *tokenStream) keepAlives(t *testing.T, n int) {
	t.Helper()
	for got := 0; got < n; {
		if !s.sc.Scan() {
			if err := s.sc.Err(); errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("%d keep-alives came, want %d: no more came before the test's deadline (is the gate's beat held?)", got, n)
			}
			t.Fatalf("stream ended after %d keep-alives, want %d (%v)", got, n, s.sc.Err())
		}
		if l := s.sc.Text(); strings.HasPrefix(l, `data: {"jsonrpc":"2.0","method":"notifications/progress"`) {
			got++
		} else if strings.HasPrefix(l, "data: ") {
			t.Fatalf("while held: %s", l)
		}
	}
}

// rest reads the stream to its end and returns its last data line: the
// answer, after which nothing is written.
func (s *tokenStream) rest(t *testing.T) string {
	t.Helper()
	var last string
	for s.sc.Scan() {
		if l, ok := strings.CutPrefix(s.sc.Text(), "data: "); ok {
			last = l
		}
	}
	if err := s.sc.Err(); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the stream did not end before the test's deadline (last data line %s)", last)
	} else if err != nil {
		t.Fatal(err)
	}
	_ = s.body.Close()
	return last
}

// TestLeanParkedCallsWithTokenNoGoroutine (issue 13): held calls of a
// 2025-era session that carry a progress token, parked off net/http's
// connection, are waited for without a goroutine each: their keep-alives
// are written by the gate's beat calling back per slot (not a goroutine
// per call waiting on the beat's channel in gate.WaitHold), the first at
// once, then at every beat. On the callback path a drop still releases
// the call's hold (ErrClientGone after the drop grace), the agent's
// notifications/cancelled still cancels it, and an approved call runs
// once and is answered after its keep-alives, with nothing after.
func TestLeanParkedCallsWithTokenNoGoroutine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the shared poller of parked connections is Linux's (epoll)")
	}
	verifyNoLeaks(t)
	opts := HTTPOptions{HeartbeatFirst: time.Hour, Heartbeat: time.Hour, DropGrace: time.Millisecond}
	f, base, parked, sid, version := parkedTokenSession(t, 20*time.Millisecond, &opts)

	const k = 12
	before := runtime.NumGoroutine()
	existing := goroutineIDs(parkedStacks("goroutine "))
	streams := make([]*tokenStream, k)
	for i := range k {
		c, host := dialRaw(t, base)
		if _, err := io.WriteString(c, rawSessionPOST(host, sid, version, fmt.Sprint("t-", i), "up__big", fmt.Sprintf(`{"n":%d}`, i),
			fmt.Sprintf(`{"progressToken":%d}`, i))); err != nil {
			t.Fatal(err)
		}
		streams[i] = openTokenStream(t, c)
	}
	f.waitState(t, approval.StatePending, k)
	waitParkedCount(t, parked, k)
	for _, s := range streams {
		s.keepAlives(t, 3) // the first at once, then the beat's
	}
	if w := parkedStacks("gate.(*Gate).waitFor"); len(w) != 0 {
		t.Fatalf("%d held calls wait on a goroutine in the gate, want none:\n%s", len(w), w[0])
	}
	// No goroutine per held call: k more would be one each. The
	// process's own may come and go meanwhile (see
	// testLeanParkedGoroutines), as may the beat's.
	const stray = k / 2
	for deadline := time.Now().Add(testWait); ; time.Sleep(5 * time.Millisecond) {
		d := runtime.NumGoroutine() - before
		if d <= stray {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d more goroutines with %d calls held with tokens, want at most %d; the new ones:\n%s",
				d, k, stray, newGoroutines(existing, "\x00"))
		}
	}
	for _, s := range streams {
		s.keepAlives(t, 1) // they go on
	}

	// A drop: the hold is released after the drop grace, the request
	// stays pending.
	_ = streams[0].conn.Close()
	for deadline := time.Now().Add(testWait); ; time.Sleep(5 * time.Millisecond) {
		if r := requestOf(t, f, 0); r.State == approval.StatePending && r.LeaseLapsed(time.Now()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the dropped call's hold was not released")
		}
	}
	// The agent's cancel.
	if st := postStatus(t, base, aliceToken, sid, version, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"t-1"}}`); st != http.StatusAccepted {
		t.Fatalf("cancel: %d, want 202", st)
	}
	f.waitState(t, approval.StateCancelled, 1)
	if last := streams[1].rest(t); strings.Contains(last, "notifications/progress") {
		t.Errorf("cancelled call's stream ended on a keep-alive: %s", last)
	}
	// The others approved: each runs once and is answered last.
	for _, r := range f.waitState(t, approval.StatePending, k-1) {
		if argN(t, r) == 0 {
			continue
		}
		if _, err := f.gt.Review(t.Context(), r.ID, approval.Principal{ID: "carol", Kind: "human"}, approval.VerdictApprove, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range streams[2:] {
		if last := s.rest(t); !strings.Contains(last, fmt.Sprintf(`"id":"t-%d","result"`, i+2)) || strings.Contains(last, `"isError":true`) {
			t.Errorf("approved call %d: last event %s, want its result", i+2, last)
		}
	}
	if n := f.h.count("big"); n != k-2 {
		t.Fatalf("the approved calls ran %d times, want %d", n, k-2)
	}
}

// requestOf is f's one request whose arguments are {"n": n}.
func requestOf(t *testing.T, f *leanFixture, n int) approval.Request {
	t.Helper()
	rs, _, err := f.db.ListRequests(t.Context(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if argN(t, r) == n {
			return r
		}
	}
	t.Fatalf("no request with arguments {\"n\":%d}", n)
	return approval.Request{}
}

// argN is the n of r's arguments.
func argN(t *testing.T, r approval.Request) int {
	t.Helper()
	var a struct{ N int }
	if err := json.Unmarshal(r.Arguments, &a); err != nil {
		t.Fatalf("arguments %s: %v", r.Arguments, err)
	}
	return a.N
}

// parkedTokenSession is a lean front that parks held calls (parkedFront)
// on a fixture whose upstream "up" answers at once, the gate's keep-alives
// every beat (newLeanProgFixture), and a 2025-era agent session on it,
// open until the test ends: the fixture, the front's base URL, its count
// of parked calls, and the session's id and protocol version.
func parkedTokenSession(t *testing.T, beat time.Duration, opts *HTTPOptions) (f *leanFixture, base string, parked *atomic.Int64, sid, version string) {
	t.Helper()
	h := newHooks()
	close(h.release)
	f = newLeanProgFixture(t, ServerConfig{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}, h, beat, opts)
	base, parked = parkedFront(t, f, opts)
	cs := connectHTTP(t, base, aliceToken, nil, nil)
	waitInitialized(t, f.g, cs.ID())
	return f, base, parked, cs.ID(), cs.InitializeResult().ProtocolVersion
}
