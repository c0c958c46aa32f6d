package gateway

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// Attacks on parked held calls (leanpark.go) as a hostile or careless
// client would make them.

// TestLeanParkedCallOnTLSNotHTTP2: a held 2026-07-28 call over TLS is
// parked on HTTP/1.1 (since branch tlspark32: leanparktls.go) and keeps
// the connection's path on HTTP/2 (no hijack); either is answered once
// approved.
func TestLeanParkedCallOnTLSNotHTTP2(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, nil)
	var parked atomic.Int64
	f.g.parkHook = func() { parked.Add(1) }
	h, err := f.g.Handler(testAuth, nil)
	f.g.parkHook = nil
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(h)
	ts.EnableHTTP2 = true
	ts.StartTLS()
	t.Cleanup(ts.Close)
	h1 := ts.Client().Transport.(*http.Transport).Clone()
	h1.ForceAttemptHTTP2 = false
	h1.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	h1.TLSClientConfig = h1.TLSClientConfig.Clone()
	h1.TLSClientConfig.NextProtos = []string{"http/1.1"}
	t.Cleanup(h1.CloseIdleConnections)
	for _, tc := range []struct {
		name   string
		c      *http.Client
		proto  int
		parked int64 // the calls parked so far
	}{{"HTTP/2", ts.Client(), 2, 0}, {"HTTP/1.1 over TLS", &http.Client{Transport: h1}, 1, 1}} {
		body := modernCallBody("7", "up__big", `{"n":1}`, "")
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+"/mcp", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{"Authorization": "Bearer " + aliceToken, "Content-Type": "application/json",
			"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": modernVersion, "Mcp-Method": "tools/call", "Mcp-Name": "up__big"} {
			req.Header.Set(k, v)
		}
		ex, b := f.doApproving(t, tc.c, req)
		if ex.StatusCode != http.StatusOK || ex.ProtoMajor != tc.proto || !bytes.Contains(b, []byte(`"id":7,`)) || bytes.Contains(b, []byte(`"isError":true`)) {
			t.Fatalf("%s: %+v %s", tc.name, ex, b)
		}
		if n := parked.Load(); n != tc.parked {
			t.Fatalf("%s: %d calls parked so far, want %d", tc.name, n, tc.parked)
		}
	}
	if n := f.h.count("big"); n != 2 {
		t.Fatalf("big ran %d times, want 2", n)
	}
}

// TestLeanParkedCallsEndOnClose: the gateway's Close with several parked
// calls answers each as on the connection's path ("went away", the
// request left pending), closes their connections and leaves no goroutine
// behind.
func TestLeanParkedCallsEndOnClose(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, nil)
	base, parked := parkedFront(t, f, nil)
	const n = 4
	conns := make([]net.Conn, n)
	for i := range conns {
		c, host := dialRaw(t, base)
		if _, err := io.WriteString(c, rawModernRequest(host, "1", "up__big", `{"n":`+string(rune('1'+i))+`}`)); err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	f.waitState(t, approval.StatePending, n)
	// A call is admitted (its request pending) before it is parked.
	waitParkedCount(t, parked, n)
	if err := f.g.Close(); err != nil {
		t.Fatal(err)
	}
	if got := parked.Load(); got != n {
		t.Fatalf("%d calls parked, want %d", got, n)
	}
	for i, c := range conns {
		br := bufio.NewReader(c)
		resp, b := readRaw(t, br)
		if resp.StatusCode != http.StatusOK || !resp.Close || !bytes.Contains(b, []byte("went away")) {
			t.Errorf("call %d at Close: %d close=%v %s", i, resp.StatusCode, resp.Close, b)
		}
		_ = c.SetReadDeadline(time.Now().Add(testWait))
		if k, err := br.Read(make([]byte, 1)); k != 0 || err == nil {
			t.Errorf("call %d: the connection stayed open after the answer (%d, %v)", i, k, err)
		}
	}
	f.waitState(t, approval.StatePending, n)
	if k := f.h.count("big"); k != 0 {
		t.Fatalf("big ran %d times", k)
	}
}

// TestLeanParkedCallHalfClose: a client that half-closes its connection
// after the POST is gone, as net/http's own read takes it on the
// connection's path: the parked call is cancelled at once, never runs,
// and its answer still reaches the half-open connection.
func TestLeanParkedCallHalfClose(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, &HTTPOptions{DropGrace: time.Hour})
	base, parked := parkedFront(t, f, &HTTPOptions{DropGrace: time.Hour})
	c, host := dialRaw(t, base)
	if _, err := io.WriteString(c, rawModernRequest(host, "3", "up__big", `{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	f.waitState(t, approval.StatePending, 1)
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	resp, b := readRaw(t, bufio.NewReader(c))
	if !resp.Close || !bytes.Contains(b, []byte(`"id":3,`)) || !bytes.Contains(b, []byte(`"isError":true`)) {
		t.Fatalf("answer after half-close: %d close=%v %s", resp.StatusCode, resp.Close, b)
	}
	f.waitState(t, approval.StateCancelled, 1)
	if got := parked.Load(); got != 1 {
		t.Fatalf("%d calls parked, want 1", got)
	}
	if k := f.h.count("big"); k != 0 {
		t.Fatalf("big ran %d times", k)
	}
}

// TestLeanParkedCallPipelinedHeldAndGarbage: a held POST pipelined after
// a held POST is parked in its turn, after the first one's answer; bytes
// that are no HTTP request after it get net/http's 400 and the
// connection's end; each approved call runs once.
func TestLeanParkedCallPipelinedHeldAndGarbage(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, nil)
	base, parked := parkedFront(t, f, nil)
	c, host := dialRaw(t, base)
	all := rawModernRequest(host, "1", "up__big", `{"n":1}`) + rawModernRequest(host, "2", "up__big", `{"n":2}`) + "NOT HTTP AT ALL\r\n\r\n"
	if _, err := io.WriteString(c, all); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for i, id := range []string{`"id":1,`, `"id":2,`} {
		f.approveNext(t)
		resp, b := readRaw(t, br)
		if resp.StatusCode != http.StatusOK || resp.Close || !bytes.Contains(b, []byte(id)) || bytes.Contains(b, []byte(`"isError":true`)) {
			t.Fatalf("answer %d: %d close=%v %s", i, resp.StatusCode, resp.Close, b)
		}
	}
	if got := parked.Load(); got != 2 {
		t.Fatalf("%d calls parked, want 2", got)
	}
	resp, _ := readRaw(t, br)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("garbage: %d, want 400", resp.StatusCode)
	}
	_ = c.SetReadDeadline(time.Now().Add(testWait))
	if k, err := br.Read(make([]byte, 1)); k != 0 || err == nil {
		t.Errorf("the connection stayed open after the 400 (%d, %v)", k, err)
	}
	if k := f.h.count("big"); k != 2 {
		t.Fatalf("big ran %d times, want 2", k)
	}
}

// TestLeanParkedCallDropRacesApproval: a client that drops its connection
// while its parked call is approved: whichever wins, the call runs at most
// once per consumed approval, and no request stays pending.
func TestLeanParkedCallDropRacesApproval(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, &HTTPOptions{DropGrace: time.Hour})
	base, _ := parkedFront(t, f, &HTTPOptions{DropGrace: time.Hour})
	const rounds = 6
	for i := range rounds {
		c, host := dialRaw(t, base)
		if _, err := io.WriteString(c, rawModernRequest(host, "1", "up__big", `{"n":`+string(rune('1'+i))+`}`)); err != nil {
			t.Fatal(err)
		}
		rs := f.waitState(t, approval.StatePending, 1)
		dropped := make(chan struct{})
		go func() {
			defer close(dropped)
			_ = c.Close()
		}()
		// The drop may win: then the request is cancelled and the review
		// fails.
		_, _ = f.gt.Review(t.Context(), rs[0].ID, approval.Principal{ID: "carol", Kind: "human"}, approval.VerdictApprove, "", "")
		<-dropped
		f.waitState(t, approval.StatePending, 0)
	}
	// Every consumed request gets its dispatch's outcome recorded.
	consumed := f.consumedCount(t)
	f.waitOutcomes(t, consumed)
	if k := f.h.count("big"); k > consumed {
		t.Fatalf("big ran %d times for %d consumed approvals", k, consumed)
	}
}

// waitOutcomes waits until the store has n consumed requests, each with
// its dispatch's outcome recorded, and returns the outcomes.
func (f *leanFixture) waitOutcomes(t *testing.T, n int) []approval.Outcome {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		rs, _, err := f.db.ListRequests(t.Context(), store.Filter{State: approval.StateConsumed})
		if err != nil {
			t.Fatal(err)
		}
		var outs []approval.Outcome
		for _, r := range rs {
			if r.DispatchOutcome != approval.OutcomeNone {
				outs = append(outs, r.DispatchOutcome)
			}
		}
		if len(rs) == n && len(outs) == n {
			return outs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d consumed requests, %d with an outcome (%v), want %d", len(rs), len(outs), outs, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// consumedCount is how many requests the store has consumed.
func (f *leanFixture) consumedCount(t *testing.T) int {
	t.Helper()
	rs, _, err := f.db.ListRequests(t.Context(), store.Filter{State: approval.StateConsumed})
	if err != nil {
		t.Fatal(err)
	}
	return len(rs)
}

// TestLeanParkedCallClientStopsReading: a client whose parked call is
// approved but that reads nothing of its large answer (a tiny receive
// window) does not keep the parked call's goroutine past the write
// deadline: the call ran once, its outcome is recorded (consumed) before
// the answer is written, and the gateway's Close, which waits for that
// goroutine, returns.
func TestLeanParkedCallClientStopsReading(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixtureWith(t, &Options{MaxResultBytes: 64 << 20}, nil)
	f.g.parkWrite = 50 * time.Millisecond
	base, parked := parkedFront(t, f, nil)
	c, host := dialRaw(t, base)
	_ = c.(*net.TCPConn).SetReadBuffer(1 << 10)
	if _, err := io.WriteString(c, rawModernRequest(host, "4", "up__big", `{"n":1048576}`)); err != nil {
		t.Fatal(err)
	}
	f.approveNext(t)
	if out := f.waitOutcomes(t, 1)[0]; out != approval.OutcomeOK {
		t.Fatalf("outcome %q, want %q", out, approval.OutcomeOK)
	}
	// Close waits for the parked call's goroutine: it returns only once
	// the write gave up.
	if err := f.g.Close(); err != nil {
		t.Fatal(err)
	}
	if got := parked.Load(); got != 1 {
		t.Fatalf("%d calls parked, want 1", got)
	}
	if k := f.h.count("big"); k != 1 {
		t.Fatalf("big ran %d times, want 1", k)
	}
}

// TestLeanParkedCallHugePipelinedBody: a request pipelined behind a parked
// call with a large body (most of it still unread in the socket when the
// call is parked) is served whole after the held call's answer, and one
// over the body limit gets the front's 413.
func TestLeanParkedCallHugePipelinedBody(t *testing.T) {
	verifyNoLeaks(t)
	opts := &HTTPOptions{MaxBody: 1 << 20}
	f := newLeanFixture(t, opts)
	base, parked := parkedFront(t, f, opts)
	for i, tc := range []struct {
		pad    int
		status int
	}{{512 << 10, http.StatusOK}, {2 << 20, http.StatusRequestEntityTooLarge}} {
		c, host := dialRaw(t, base)
		all := rawModernRequest(host, "1", "up__big", `{"n":1}`) + rawModernRequest(host, "2", "up__echo", `{"pad":"`+strings.Repeat("p", tc.pad)+`"}`)
		wrote := make(chan error, 1)
		go func() {
			_, err := io.WriteString(c, all)
			wrote <- err
		}()
		f.approveNext(t)
		br := bufio.NewReader(c)
		resp, b := readRaw(t, br)
		if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"id":1,`)) {
			t.Fatalf("pad %d: held answer %d %s", tc.pad, resp.StatusCode, b)
		}
		resp, b = readRaw(t, br)
		if resp.StatusCode != tc.status {
			t.Fatalf("pad %d: pipelined answer %d, want %d", tc.pad, resp.StatusCode, tc.status)
		}
		if tc.status == http.StatusOK {
			if got := <-f.h.args; len(got) < tc.pad || !bytes.Contains(b, []byte(`"id":2,`)) {
				t.Fatalf("pad %d: the upstream got %d bytes of arguments", tc.pad, len(got))
			}
			if err := <-wrote; err != nil {
				t.Fatal(err)
			}
		}
		_ = c.Close()
		if tc.status != http.StatusOK {
			// The front closed on the rest of the body: an error or not.
			t.Logf("the pipelined write after the 413: %v", <-wrote)
		}
		if got := parked.Load(); got != int64(i+1) {
			t.Fatalf("%d calls parked, want %d", got, i+1)
		}
	}
}
