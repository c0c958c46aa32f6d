package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// TestCloseWithQueuedApprovedCalls (attack34): the gateway's Close while
// approved parked calls wait in the answer queue (bound 2, both answering
// goroutines held): Close waits for them, every client gets an answer,
// and no approved request is left approved without a trace: each ran or
// was ended with a state and reason the store keeps.
func TestCloseWithQueuedApprovedCalls(t *testing.T) {
	f := newLeanFixture(t, &HTTPOptions{DropGrace: time.Hour})
	release := make(chan struct{})
	entered := make(chan struct{}, 16)
	f.g.answerQ = newParkQueue(2, func(l *leanHold) {
		entered <- struct{}{}
		<-release
		l.answerQueued()
	})
	base, parked := parkedFront(t, f, &HTTPOptions{DropGrace: time.Hour})
	modernPost(t, base, "up__echo", modernCallBody("1", "up__echo", `{}`, ""), nil)
	<-f.h.args

	const calls = 5
	conns := make([]net.Conn, calls)
	for i := range calls {
		c, host := dialRaw(t, base)
		conns[i] = c
		if _, err := io.WriteString(c, rawModernRequest(host, fmt.Sprint(10+i), "up__big", fmt.Sprintf(`{"n":%d}`, 10+i))); err != nil {
			t.Fatal(err)
		}
		waitParkedCount(t, parked, int64(i+1))
	}
	f.waitState(t, approval.StatePending, calls)
	all, _, err := f.db.ListRequests(t.Context(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range all {
		if _, err := f.gt.Review(t.Context(), r.ID, approval.Principal{ID: "carol", Kind: "human"}, approval.VerdictApprove, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		select {
		case <-entered:
		case <-time.After(testWait):
			t.Fatal("the decided calls did not reach the answering goroutines")
		}
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
	select {
	case <-closed:
		t.Fatal("Close returned while decided calls were still queued")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	select {
	case <-closed:
	case <-time.After(testWait):
		t.Fatal("Close did not return after the queued calls were released")
	}
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(testWait))
		resp, b := readRaw(t, bufio.NewReader(c))
		if resp.StatusCode != 200 || !strings.Contains(string(b), fmt.Sprintf(`"id":%d,`, 10+i)) || !strings.Contains(string(b), `"isError":true`) {
			t.Errorf("call %d: %d %s; want its answer, an error (the gateway closed before it ran)", i, resp.StatusCode, b)
		}
	}
	rs, _, err := f.db.ListRequests(t.Context(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Tool == "big" && (r.State != approval.StateConsumed || r.DispatchOutcome == "") {
			t.Errorf("request %s after Close: %s, outcome %q; want consumed with its outcome recorded", r.ID, r.State, r.DispatchOutcome)
		}
	}
}
