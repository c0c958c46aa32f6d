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

// TestLeanParkedCloseServesNothingMore (attack33): a held 2026-07-28 call
// whose client asked to close the connection ("Connection: close") and
// then pipelined a second call, with the first (buffered when it is
// parked) or while it is held (read by the drop watch), gets its answer
// with "Connection: close" and the connection's end, and the second call
// is never run, as net/http does (RFC 9112 9.6: a server that received
// "close" must not process further requests on the connection). On
// integ43 the parked call was answered as a keep-alive one and the second
// call ran.
func TestLeanParkedCloseServesNothingMore(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, nil)
	base, parked := parkedFront(t, f, nil)
	modernPost(t, base, "up__echo", modernCallBody("1", "up__echo", `{}`, ""), nil)
	<-f.h.args
	echoes := f.h.count("echo")

	for i, together := range []bool{true, false} {
		c, host := dialRaw(t, base)
		first := strings.Replace(rawModernRequest(host, "2", "up__big", `{"n":5}`), "\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1)
		second := rawModernRequest(host, "3", "up__echo", `{"after":1}`)
		if together {
			first += second
		}
		if _, err := io.WriteString(c, first); err != nil {
			t.Fatal(err)
		}
		f.waitState(t, approval.StatePending, 1)
		waitParkedCount(t, parked, int64(i+1))
		if !together {
			if _, err := io.WriteString(c, second); err != nil {
				t.Fatal(err)
			}
		}
		f.approveNext(t)
		br := bufio.NewReader(c)
		resp, b := readRaw(t, br)
		if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"id":2,`)) {
			t.Fatalf("together %v: held answer %d %s", together, resp.StatusCode, b)
		}
		if !resp.Close {
			t.Errorf("together %v: the held answer has no Connection: close (%q)", together, resp.Header.Values("Connection"))
		}
		_ = c.SetReadDeadline(time.Now().Add(testWait))
		if rest, err := io.ReadAll(br); len(rest) != 0 || err != nil {
			t.Errorf("together %v: after the answer to a Connection: close request, the connection gave %q (%v), want its end", together, rest, err)
		}
		_ = c.Close()
		f.waitState(t, approval.StateConsumed, i+1)
	}
	if n := f.h.count("echo"); n != echoes {
		t.Fatalf("the call pipelined after Connection: close ran %d times, want 0", n-echoes)
	}
}

// TestLeanParkedTLSCloseServesNothingMore (attack33): as
// TestLeanParkedCloseServesNothingMore over TLS: the answer says
// "Connection: close", the connection ends after it (a close_notify) and
// the call sent after it, in the same record (drained at park time) or
// while held (read through the TLS layer by the watch), is never run.
func TestLeanParkedTLSCloseServesNothingMore(t *testing.T) {
	verifyNoLeaks(t)
	opts := &HTTPOptions{DropGrace: time.Hour}
	f := newLeanFixtureWith(t, nil, opts)
	ts, parked := serveTLSParked(t, f.g, opts)
	for i, together := range []bool{true, false} {
		c, host := dialTLS(t, ts)
		first := strings.Replace(rawModernRequest(host, "1", "up__big", `{"n":3}`), "\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1)
		second := rawModernRequest(host, "2", "up__echo", `{"after":1}`)
		if together {
			first += second
		}
		if _, err := io.WriteString(c, first); err != nil {
			t.Fatal(err)
		}
		f.waitState(t, approval.StatePending, 1)
		waitParkedCount(t, parked, int64(i+1))
		if !together {
			if _, err := io.WriteString(c, second); err != nil {
				t.Fatal(err)
			}
		}
		f.approveNext(t)
		br := bufio.NewReader(c)
		resp, b := readRaw(t, br)
		if resp.StatusCode != http.StatusOK || !resp.Close || !bytes.Contains(b, []byte(`"id":1,"result"`)) {
			t.Fatalf("together %v: held call: %d close=%t %s", together, resp.StatusCode, resp.Close, b)
		}
		_ = c.SetReadDeadline(time.Now().Add(testWait))
		if rest, err := io.ReadAll(br); len(rest) != 0 || err != nil {
			t.Errorf("together %v: after the answer to a Connection: close request, the connection gave %q (%v), want its end", together, rest, err)
		}
		_ = c.Close()
		f.waitState(t, approval.StateConsumed, i+1)
	}
	if n := f.h.count("echo"); n != 0 {
		t.Fatalf("the call pipelined after Connection: close ran %d times, want 0", n)
	}
}
