package gateway

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"testing"

	"toolgate/internal/approval"
)

// TestLeanServedAfterParkIsEvictableWhenIdle: a connection served after a
// parked call's answer (serveRest, the client pipelined a request behind
// the held one) and then idle between requests is, for the listener that
// caps connections, an idle one: at the cap, a new connection evicts it
// (the longest idle) and not the newer one that sent nothing yet. Before,
// the listener counted it as carrying a request (hijacked) until
// restIdleTimeout.
func TestLeanServedAfterParkIsEvictableWhenIdle(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, nil)
	base, _, l, parked := cappedFront(t, f, nil, 2, testWait, 0)

	a, host := dialRaw(t, base)
	if _, err := io.WriteString(a, rawModernRequest(host, "2", "up__big", `{"n":5}`)+rawModernRequest(host, "3", "up__echo", `{"after":1}`)); err != nil {
		t.Fatal(err)
	}
	f.waitState(t, approval.StatePending, 1)
	waitParkedCount(t, parked, 1)
	f.approveNext(t)
	br := bufio.NewReader(a)
	if resp, b := readRaw(t, br); resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"id":2,`)) {
		t.Fatalf("held answer %d %s", resp.StatusCode, b)
	}
	if resp, b := readRaw(t, br); resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"id":3,`)) {
		t.Fatalf("pipelined answer %d %s", resp.StatusCode, b)
	}
	<-f.h.args
	// The connection goes idle once its answer is written.
	b := waitEvicted(t, l, base, a, br)
	if _, err := io.WriteString(b, rawModernRequest(host, "4", "up__echo", `{"b":1}`)); err != nil {
		t.Fatal(err)
	}
	if resp, body := readRaw(t, bufio.NewReader(b)); resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"id":4,`)) {
		t.Fatalf("the newer connection was not served: %d %s", resp.StatusCode, body)
	}
	<-f.h.args
}
