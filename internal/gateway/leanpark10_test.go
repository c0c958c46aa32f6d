package gateway

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestLeanParkedHTTP10AsNetHTTP: a held 2026-07-28 call sent as HTTP/1.0
// is answered, when parked, with the status line net/http writes for the
// same call held on the connection's goroutine ("HTTP/1.0 200 OK") and
// its way of ending the connection: an HTTP/1.0 answer after which the
// connection ends carries no Connection header (for HTTP/1.0 that means
// close); one that keeps the connection (a keep-alive client that
// pipelined its next request) says "Connection: keep-alive". A parked
// call whose client sent nothing more ends its connection after the
// answer (leanpark.go), so a keep-alive client's answer differs from
// net/http's there, as for HTTP/1.1. On 78ec92b the parked answer started
// "HTTP/1.1" and said "Connection: close" / nothing.
func TestLeanParkedHTTP10AsNetHTTP(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, nil)
	parkedBase, parked := parkedFront(t, f, nil)
	f.g.noPark = true
	onConnBase := serveHTTP(t, f.g, nil)
	f.g.noPark = false

	type head struct {
		status     string
		connection string
		close      bool
		ended      bool
	}
	http10 := func(host, id, tool, args string, keep bool) string {
		r := strings.Replace(rawModernRequest(host, id, tool, args), " HTTP/1.1\r\n", " HTTP/1.0\r\n", 1)
		if keep {
			r = strings.Replace(r, "\r\n\r\n", "\r\nConnection: keep-alive\r\n\r\n", 1)
		}
		return r
	}
	calls, parks := 0, int64(0)
	// held sends the held call (with next pipelined after it, if any) on
	// a connection of base, approves it and returns the answer's head.
	held := func(base string, keep bool, next string) (head, *bufio.Reader) {
		t.Helper()
		c, host := dialRaw(t, base)
		req := http10(host, "2", "up__big", `{"n":5}`, keep)
		if next != "" {
			req += http10(host, "5", next, `{"after":1}`, keep)
		}
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		f.waitState(t, approval.StatePending, 1)
		if base == parkedBase {
			parks++
			waitParkedCount(t, parked, parks)
		}
		f.approveNext(t)
		calls++
		var raw bytes.Buffer
		br := bufio.NewReader(io.TeeReader(c, &raw))
		resp, b := readRaw(t, br)
		if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"id":2,`)) {
			t.Fatalf("keep %v, parked %v: held answer %d %s", keep, base == parkedBase, resp.StatusCode, b)
		}
		// The head as written (ReadResponse drops "Connection: close").
		wire, _, _ := strings.Cut(raw.String(), "\r\n\r\n")
		lines := strings.Split(wire, "\r\n")
		h := head{status: lines[0], close: resp.Close}
		for _, l := range lines[1:] {
			if k, v, _ := strings.Cut(l, ":"); http.CanonicalHeaderKey(k) == "Connection" {
				h.connection += strings.TrimSpace(v)
			}
		}
		if next == "" && (!keep || base == parkedBase) {
			_ = c.SetReadDeadline(time.Now().Add(testWait))
			rest, err := io.ReadAll(br)
			h.ended = len(rest) == 0 && err == nil
		}
		f.waitState(t, approval.StateConsumed, calls)
		return h, br
	}

	want10 := head{status: "HTTP/1.0 200 OK", close: true, ended: true}
	for _, keep := range []bool{false, true} {
		parkedHead, _ := held(parkedBase, keep, "")
		onConn, _ := held(onConnBase, keep, "")
		if onConn.status != want10.status {
			t.Errorf("keep-alive %v: net/http's status line %q, want %q (the test's premise)", keep, onConn.status, want10.status)
		}
		if parkedHead != want10 {
			t.Errorf("keep-alive %v: parked answer %+v, want %+v (net/http's answer: %+v)", keep, parkedHead, want10, onConn)
		}
	}

	// A keep-alive client that pipelined its next request keeps the
	// connection, as net/http lets it, and is served on.
	for _, base := range []string{parkedBase, onConnBase} {
		h, br := held(base, true, "up__echo")
		if want := (head{status: "HTTP/1.0 200 OK", connection: "keep-alive"}); h != want {
			t.Errorf("parked %v: answer with a pipelined request %+v, want %+v", base == parkedBase, h, want)
		}
		if resp, b := readRaw(t, br); resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"id":5,`)) {
			t.Fatalf("parked %v: the call after the held one on the same HTTP/1.0 keep-alive connection: %d %s", base == parkedBase, resp.StatusCode, b)
		}
	}
}
