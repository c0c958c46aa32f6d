package gateway

import (
	"bufio"
	"io"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestApprovedCallCutByCloseSaysShuttingDown: a 2026-07-28 agent's
// approved call that reaches its upstream only after Close began (it
// waited in the answer queue) is answered that the gateway is shutting
// down and nothing was sent, not that its upstream session "could not be
// opened"; the request ends consumed with outcome transport_error (nothing
// was sent), as before.
func TestApprovedCallCutByCloseSaysShuttingDown(t *testing.T) {
	f := newLeanFixture(t, &HTTPOptions{DropGrace: time.Hour})
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	f.g.answerQ = newParkQueue(1, func(l *leanHold) {
		entered <- struct{}{}
		<-release
		l.answerQueued()
	})
	base, parked := parkedFront(t, f, &HTTPOptions{DropGrace: time.Hour})
	c, host := dialRaw(t, base)
	if _, err := io.WriteString(c, rawModernRequest(host, "7", "up__big", `{"n":7}`)); err != nil {
		t.Fatal(err)
	}
	waitParkedCount(t, parked, 1)
	f.waitState(t, approval.StatePending, 1)
	f.approveNext(t)
	select {
	case <-entered:
	case <-time.After(testWait):
		t.Fatal("the approved call did not reach the answer queue")
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_ = f.g.Close()
	}()
	for deadline := time.Now().Add(testWait); f.g.root.Err() == nil; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Close did not start")
		}
	}
	close(release)
	select {
	case <-closed:
	case <-time.After(testWait):
		t.Fatal("Close did not return")
	}
	_ = c.SetReadDeadline(time.Now().Add(testWait))
	resp, b := readRaw(t, bufio.NewReader(c))
	body := string(b)
	const want = `upstream \"up\" is unavailable: the gateway is shutting down; the call was not sent and nothing was run`
	if resp.StatusCode != 200 || !strings.Contains(body, `"id":7,`) || !strings.Contains(body, `"isError":true`) || !strings.Contains(body, want) {
		t.Errorf("answer %d %s\nwant an isError result saying %s", resp.StatusCode, body, want)
	}
	if strings.Contains(body, "could not be opened") {
		t.Errorf("answer %s says the session could not be opened; the gateway was shutting down", body)
	}
	rs := f.waitState(t, approval.StateConsumed, 1)
	if rs[0].DispatchOutcome != approval.OutcomeTransportError {
		t.Errorf("outcome %q, want %q (nothing was sent)", rs[0].DispatchOutcome, approval.OutcomeTransportError)
	}
}
