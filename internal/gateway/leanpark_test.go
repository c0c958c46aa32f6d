package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
)

// parkedFront serves f's gateway once more with a hook counting the held
// calls parked off net/http's connection, and returns its base URL and
// the counter.
func parkedFront(t *testing.T, f *leanFixture, opts *HTTPOptions) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	f.g.parkHook = func() { n.Add(1) }
	base := serveHTTP(t, f.g, opts)
	f.g.parkHook = nil
	return base, &n
}

// rawModernRequest is a 2026-07-28 tools/call POST of tool as an HTTP/1.1
// client writes it.
func rawModernRequest(host, id, tool, args string) string {
	body := modernCallBody(id, tool, args, "")
	return fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: %s\r\nMcp-Method: tools/call\r\nMcp-Name: %s\r\n"+
		"Content-Length: %d\r\n\r\n%s", host, aliceToken, modernVersion, tool, len(body), body)
}

// dialRaw opens a TCP connection to base's host.
func dialRaw(t *testing.T, base string) (net.Conn, string) {
	t.Helper()
	host := strings.TrimPrefix(base, "http://")
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, host
}

// A rawResponse is what a raw client read of a response (its body read
// and closed).
type rawResponse struct {
	StatusCode       int
	Header           http.Header
	Close            bool
	ContentLength    int64
	TransferEncoding []string
}

// readRaw reads one response from br and returns it with its body.
func readRaw(t *testing.T, br *bufio.Reader) (rawResponse, []byte) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rawResponse{resp.StatusCode, resp.Header, resp.Close, resp.ContentLength, resp.TransferEncoding}, b
}

// sameAsConnectionPath reports whether a parked call's answer has the
// headers the connection's goroutine would have written (sdk: the same
// call answered there, as asJSONAnswer makes the SDK path's answer),
// except the framing: Content-Length, and "Connection: close" (closing).
func sameAsConnectionPath(parked rawResponse, body []byte, sdk http.Header, closing bool) error {
	if parked.ContentLength != int64(len(body)) || len(parked.TransferEncoding) != 0 {
		return fmt.Errorf("framing: Content-Length %d, Transfer-Encoding %v for %d bytes", parked.ContentLength, parked.TransferEncoding, len(body))
	}
	if parked.Close != closing {
		return fmt.Errorf("connection header %q, want close %v", parked.Header.Values("Connection"), closing)
	}
	for _, k := range []string{"Content-Type", "Cache-Control", "Mcp-Session-Id"} {
		if a, b := parked.Header.Values(k), sdk.Values(k); strings.Join(a, ",") != strings.Join(b, ",") {
			return fmt.Errorf("%s %q, the connection's path %q", k, a, b)
		}
	}
	if parked.Header.Get("Date") == "" {
		return errors.New("no Date header")
	}
	return nil
}

// TestLeanParkedCallAnswersAsBefore: a held 2026-07-28 call from a raw
// HTTP/1.1 client is parked off net/http's connection (the hook counts
// it) and answered, once approved, with the status, headers (but for the
// framing) and bytes of the same call answered on the connection's
// goroutine (the SDK path), then the connection is closed; a denied one
// likewise; one whose client drops its connection is cancelled at once
// (DropGrace is an hour) and never runs.
func TestLeanParkedCallAnswersAsBefore(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, &HTTPOptions{DropGrace: time.Hour})
	base, parked := parkedFront(t, f, &HTTPOptions{DropGrace: time.Hour})
	sdkBase := serveHTTP(t, f.g, &HTTPOptions{DisableLeanCalls: true})
	modernPost(t, base, "up__echo", modernCallBody("1", "up__echo", `{}`, ""), nil)
	<-f.h.args
	f.trail.take()

	for i, v := range []approval.Verdict{approval.VerdictApprove, approval.VerdictDeny} {
		c, host := dialRaw(t, base)
		if _, err := io.WriteString(c, rawModernRequest(host, "9", "up__big", `{"n":3}`)); err != nil {
			t.Fatal(err)
		}
		f.reviewNext(t, v)
		resp, b := readRaw(t, bufio.NewReader(c))
		if got := parked.Load(); got != int64(i+1) {
			t.Fatalf("%s: %d calls parked, want %d", v, got, i+1)
		}
		// The same call on the connection's goroutine (the SDK path).
		done := make(chan struct{})
		var sst int
		var sh http.Header
		var sb []byte
		go func() {
			defer close(done)
			sst, sh, sb = modernPost(t, sdkBase, "up__big", modernCallBody("9", "up__big", `{"n":3}`, ""), nil)
		}()
		f.reviewNext(t, v)
		<-done
		sh, sb = asJSONAnswer(t, sh, sb)
		if err := sameAsConnectionPath(resp, b, sh, true); err != nil || resp.StatusCode != sst {
			t.Errorf("%s: %v; status %d, the connection's path %d", v, err, resp.StatusCode, sst)
		}
		same := bytes.Equal(b, sb)
		if v == approval.VerdictDeny {
			same = bytes.Contains(b, []byte(`"isError":true`)) && bytes.Contains(sb, []byte(`"isError":true`)) &&
				bytes.HasSuffix(bytes.TrimSpace(b), []byte(`"resultType":"complete"}}`))
		}
		if !same {
			t.Errorf("%s:\nparked %s\nsdk    %s", v, b, sb)
		}
		// The connection is closed after the answer.
		_ = c.SetReadDeadline(time.Now().Add(testWait))
		if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Errorf("%s: the parked connection stayed open after its answer (%d, %v)", v, n, err)
		}
	}
	if n := f.h.count("big"); n != 2 {
		t.Fatalf("the approved calls ran %d times, want 2", n)
	}

	// A dropped connection cancels the parked call at once.
	c, host := dialRaw(t, base)
	if _, err := io.WriteString(c, rawModernRequest(host, "10", "up__big", `{"n":4}`)); err != nil {
		t.Fatal(err)
	}
	f.waitState(t, approval.StatePending, 1)
	waitParkedCount(t, parked, 3)
	if got := parked.Load(); got != 3 {
		t.Fatalf("%d calls parked, want 3", got)
	}
	_ = c.Close()
	f.waitState(t, approval.StateCancelled, 1)
	if n := f.h.count("big"); n != 2 {
		t.Fatalf("the cancelled call ran (%d runs, want 2)", n)
	}
}

// TestLeanParkedCallKeepsAPipelinedRequest: a second request a client
// pipelines on the connection after a held POST, sent with it (buffered
// when the call is parked) or while it is held (read by the watch), is
// answered after the held call, in order, on the same connection, which
// then stays open.
func TestLeanParkedCallKeepsAPipelinedRequest(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, nil)
	base, parked := parkedFront(t, f, nil)
	modernPost(t, base, "up__echo", modernCallBody("1", "up__echo", `{}`, ""), nil)
	<-f.h.args

	for i, together := range []bool{true, false} {
		c, host := dialRaw(t, base)
		first, second := rawModernRequest(host, "2", "up__big", `{"n":5}`), rawModernRequest(host, "3", "up__echo", `{"after":1}`)
		if together {
			first += second
		}
		if _, err := io.WriteString(c, first); err != nil {
			t.Fatal(err)
		}
		f.waitState(t, approval.StatePending, 1)
		waitParkedCount(t, parked, int64(i+1))
		if got := parked.Load(); got != int64(i+1) {
			t.Fatalf("together %v: %d calls parked, want %d", together, got, i+1)
		}
		if !together {
			if _, err := io.WriteString(c, second); err != nil {
				t.Fatal(err)
			}
		}
		f.approveNext(t)
		br := bufio.NewReader(c)
		resp, b := readRaw(t, br)
		if resp.StatusCode != http.StatusOK || resp.Close || !bytes.Contains(b, []byte(`"id":2,`)) {
			t.Fatalf("together %v: held answer %d close=%v %s", together, resp.StatusCode, resp.Close, b)
		}
		resp, b = readRaw(t, br)
		<-f.h.args
		if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"id":3,`)) || !bytes.Contains(b, []byte(`{\"after\":1}`)) {
			t.Fatalf("together %v: pipelined answer %d %s", together, resp.StatusCode, b)
		}
		// Still served: one more request on the connection.
		if _, err := io.WriteString(c, rawModernRequest(host, "4", "up__echo", `{"more":1}`)); err != nil {
			t.Fatal(err)
		}
		resp, b = readRaw(t, br)
		<-f.h.args
		if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"id":4,`)) {
			t.Fatalf("together %v: third answer %d %s", together, resp.StatusCode, b)
		}
		_ = c.Close()
		f.waitState(t, approval.StateConsumed, i+1)
	}
	if n := f.h.count("big"); n != 2 {
		t.Fatalf("the approved calls ran %d times, want 2", n)
	}
}

// TestLeanParkedCallGoClient: a go-sdk client's held 2026-07-28 call is
// parked and gets its result once approved, run once; another is
// answered when the gateway closes (Close waits for it) as on the
// connection's goroutine: "went away", the request left pending.
func TestLeanParkedCallGoClient(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, nil)
	base, parked := parkedFront(t, f, nil)
	c := mcp.NewClient(&mcp.Implementation{Name: "agent-2026", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token: aliceToken, next: http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	call := func(n int) chan answer {
		done := make(chan answer, 1)
		go func() {
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__big", Arguments: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))})
			done <- answer{res, err}
		}()
		return done
	}
	done := call(2)
	f.approveNext(t)
	a := <-done
	if a.err != nil || a.res.IsError {
		t.Fatalf("approved call: %+v %v", a.res, a.err)
	}
	if got := parked.Load(); got != 1 {
		t.Fatalf("%d calls parked, want 1", got)
	}

	done = call(3)
	f.waitState(t, approval.StatePending, 1)
	if err := f.g.Close(); err != nil {
		t.Fatal(err)
	}
	a = <-done
	if a.err != nil || !a.res.IsError || !strings.Contains(textOf(t, a.res), "went away") {
		t.Fatalf("call at shutdown: %+v %v, want the isError 'went away' result", a.res, a.err)
	}
	// As on the connection's goroutine: the request stays pending.
	f.waitState(t, approval.StatePending, 1)
	if n := f.h.count("big"); n != 1 {
		t.Fatalf("big ran %d times, want 1", n)
	}
}

// TestLeanParkedCallMaxHold: a parked call that reaches the gateway's
// MaxHold is answered as on the connection's goroutine (the SDK path):
// the pending answer naming its approval, the request left pending.
func TestLeanParkedCallMaxHold(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixtureWith(t, &Options{MaxHold: time.Millisecond}, nil)
	base, parked := parkedFront(t, f, nil)
	sdkBase := serveHTTP(t, f.g, &HTTPOptions{DisableLeanCalls: true})
	c, host := dialRaw(t, base)
	if _, err := io.WriteString(c, rawModernRequest(host, "5", "up__big", `{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	resp, b := readRaw(t, bufio.NewReader(c))
	if got := parked.Load(); got != 1 {
		t.Fatalf("%d calls parked, want 1", got)
	}
	sst, sh, sb := modernPost(t, sdkBase, "up__big", modernCallBody("5", "up__big", `{"n":1}`, ""), nil)
	sh, sb = asJSONAnswer(t, sh, sb)
	if err := sameAsConnectionPath(resp, b, sh, true); err != nil || resp.StatusCode != sst {
		t.Errorf("%v; status %d, the connection's path %d", err, resp.StatusCode, sst)
	}
	for _, a := range [][]byte{b, sb} {
		if !bytes.Contains(a, []byte(`"isError":true`)) || !bytes.Contains(a, []byte(`"id":5,`)) || !bytes.Contains(a, []byte(`toolgate/approval`)) {
			t.Errorf("max hold answer %s, want the pending answer naming the approval", a)
		}
	}
	// The same call twice: the second joins the first's pending request.
	f.waitState(t, approval.StatePending, 1)
	if n := f.h.count("big"); n != 0 {
		t.Fatalf("big ran %d times before any approval", n)
	}
}
