package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/store"
)

// Attacks on the drop watch of parked calls (leanwatch_linux.go): its
// descriptors reused, its connections reset, the gateway closing while
// drops are noticed.

// dropConn drops c as a client going away does: reset (SO_LINGER 0: an
// RST) when rst, else closed (a FIN).
func dropConn(c net.Conn, rst bool) {
	if rst {
		_ = c.(*net.TCPConn).SetLinger(0)
	}
	_ = c.Close()
}

// parkCalls opens n connections to base, each with a held call of big
// (arguments from seq on, so that no two are the same request), and
// returns them.
func parkCalls(t *testing.T, base string, n, seq int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	for i := range conns {
		c, host := dialRaw(t, base)
		if _, err := io.WriteString(c, rawModernRequest(host, fmt.Sprint(seq+i), "up__big", fmt.Sprintf(`{"n":%d}`, seq+i))); err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	return conns
}

// TestLeanParkedCallDropsAmidNewCalls: the parked calls of many clients
// that drop (half reset, half closed) while as many new clients park
// calls at once, for several rounds (the dropped connections' descriptors
// are reused by the new ones): each dropped call is cancelled at once
// (DropGrace is an hour), no new call is cancelled by another
// connection's watch, and each new call, approved, runs once and is
// answered on its own connection.
func TestLeanParkedCallDropsAmidNewCalls(t *testing.T) {
	verifyNoLeaks(t)
	opts := &HTTPOptions{DropGrace: time.Hour}
	f := newLeanFixture(t, opts)
	base, parked := parkedFront(t, f, opts)
	const n, rounds = 16, 3
	conns := parkCalls(t, base, n, 1)
	f.waitState(t, approval.StatePending, n)
	waitParkedCount(t, parked, n)
	for round := 1; round <= rounds; round++ {
		var (
			wg    sync.WaitGroup
			fresh []net.Conn
		)
		wg.Go(func() { fresh = parkCalls(t, base, n, 1+round*n) })
		for i, c := range conns {
			wg.Go(func() { dropConn(c, i%2 == 0) })
		}
		wg.Wait()
		conns = fresh
		f.waitState(t, approval.StateCancelled, round*n)
		f.waitState(t, approval.StatePending, n)
		waitParkedCount(t, parked, int64((round+1)*n))
	}
	rs := f.waitState(t, approval.StatePending, n)
	for _, r := range rs {
		if _, err := f.gt.Review(t.Context(), r.ID, approval.Principal{ID: "carol", Kind: "human"}, approval.VerdictApprove, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range conns {
		resp, b := readRaw(t, bufio.NewReader(c))
		if resp.StatusCode != http.StatusOK || !resp.Close || bytes.Contains(b, []byte(`"isError":true`)) || !bytes.Contains(b, fmt.Appendf(nil, `"id":%d,`, 1+rounds*n+i)) {
			t.Fatalf("approved call %d: %d close=%v %s", i, resp.StatusCode, resp.Close, b)
		}
	}
	if k := f.h.count("big"); k != n {
		t.Fatalf("big ran %d times, want %d", k, n)
	}
	f.waitState(t, approval.StateCancelled, rounds*n)
	if outs := f.waitOutcomes(t, n); len(outs) != n {
		t.Fatalf("outcomes %v", outs)
	}
}

// TestLeanParkedCallsCloseAmidDrops: the gateway's Close with many parked
// calls while half of their clients drop (the poller noticing drops as it
// is stopped): Close returns, no call ran, every request is cancelled (a
// drop) or left pending (Close: "went away"), each connection still open
// is answered, and no goroutine is left behind.
func TestLeanParkedCallsCloseAmidDrops(t *testing.T) {
	verifyNoLeaks(t)
	opts := &HTTPOptions{DropGrace: time.Hour}
	f := newLeanFixture(t, opts)
	base, parked := parkedFront(t, f, opts)
	const n = 30 // under the gate's 32 pending approvals per principal
	conns := parkCalls(t, base, n, 1)
	f.waitState(t, approval.StatePending, n)
	waitParkedCount(t, parked, n)
	var wg sync.WaitGroup
	for i, c := range conns[:n/2] {
		wg.Go(func() { dropConn(c, i%2 == 0) })
	}
	if err := f.g.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, c := range conns[n/2:] {
		resp, b := readRaw(t, bufio.NewReader(c))
		if resp.StatusCode != http.StatusOK || !resp.Close || !bytes.Contains(b, []byte("went away")) {
			t.Errorf("call %d at Close: %d close=%v %s", n/2+i, resp.StatusCode, resp.Close, b)
		}
	}
	all, _, err := f.db.ListRequests(t.Context(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	states := map[approval.State]int{}
	for _, r := range all {
		states[r.State]++
	}
	if len(all) != n || states[approval.StatePending]+states[approval.StateCancelled] != n || states[approval.StatePending] < n/2 {
		t.Fatalf("%d requests by state %v, want %d pending or cancelled (at least %d pending)", len(all), states, n, n/2)
	}
	if k := f.h.count("big"); k != 0 {
		t.Fatalf("big ran %d times", k)
	}
}

// TestLeanParkedCallsDroppedAtOnce: clients that close their connections
// right after sending a held call (the drop racing the POST's reading,
// the hijack, the watch's registration and the admission): each call is
// parked and ends without waiting for a decision (DropGrace is an hour):
// its request is cancelled, or none was made (the drop came before the
// admission); none is left pending and none runs.
func TestLeanParkedCallsDroppedAtOnce(t *testing.T) {
	verifyNoLeaks(t)
	opts := &HTTPOptions{DropGrace: time.Hour}
	f := newLeanFixture(t, opts)
	base, parked := parkedFront(t, f, opts)
	const n = 24
	var wg sync.WaitGroup
	for i := range n {
		c, host := dialRaw(t, base)
		wg.Go(func() {
			_, _ = io.WriteString(c, rawModernRequest(host, fmt.Sprint(i), "up__big", fmt.Sprintf(`{"n":%d}`, i)))
			_ = c.Close()
		})
	}
	wg.Wait()
	waitParkedCount(t, parked, n)
	// Every parked call ends: its admission and its wait are over. The
	// admissions are goroutines; a wait is one only with
	// Options.HeldGoroutines: by default (the gate's events) a dropped
	// call's wait ends on the poller's and the gate's goroutines after
	// the admission's is gone, so its request is looked at until it is no
	// longer pending (2 of 24 pending right after the admissions: 1 run
	// in 20 under load).
	deadline := time.Now().Add(testWait)
	for len(parkedStacks("(*leanHold).admitParked"))+len(parkedStacks("(*leanHold).waitParked")) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d parked calls still held after their clients dropped", len(parkedStacks("(*leanHold).waitParked")))
		}
		time.Sleep(5 * time.Millisecond)
	}
	for {
		pending, _, err := f.db.ListRequests(t.Context(), store.Filter{State: approval.StatePending})
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests of dropped calls still pending", len(pending))
		}
		time.Sleep(5 * time.Millisecond)
	}
	all, _, err := f.db.ListRequests(t.Context(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range all {
		if r.State != approval.StateCancelled {
			t.Errorf("request %s of a dropped call is %s, want cancelled", r.ID, r.State)
		}
	}
	if k := f.h.count("big"); k != 0 {
		t.Fatalf("big ran %d times", k)
	}
	t.Logf("%d of %d dropped calls had a request made", len(all), n)
}

// TestLeanParkedCallDropWhileRunning: a client that drops its connection
// while its approved parked call runs cancels the run (context.Canceled,
// as the SDK path's PropagateRequestCancellation), and the dispatch's
// outcome is recorded once, as cancelled after dispatch.
func TestLeanParkedCallDropWhileRunning(t *testing.T) {
	verifyNoLeaks(t)
	opts := &HTTPOptions{DropGrace: time.Hour}
	f := newLeanFixture(t, opts)
	pol := *f.pol.Load()
	pol.Rules = append([]policy.Rule{{Name: "sleep needs a human", Server: "up", Tools: []string{"sleep"}, Effect: policy.Approve}}, pol.Rules...)
	f.pol.Store(&pol)
	base, parked := parkedFront(t, f, opts)
	c := parkCallOf(t, base, "up__sleep")
	f.approveNext(t)
	<-f.h.started
	if got := parked.Load(); got != 1 {
		t.Fatalf("%d calls parked, want 1", got)
	}
	_ = c.Close()
	if err := <-f.h.ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("the run ended with %v, want context.Canceled", err)
	}
	if outs := f.waitOutcomes(t, 1); outs[0] != approval.OutcomeCancelledAfterDispatch {
		t.Fatalf("outcome %q, want %q", outs[0], approval.OutcomeCancelledAfterDispatch)
	}
	if k := f.h.count("sleep"); k != 1 {
		t.Fatalf("sleep ran %d times, want 1", k)
	}
}

// parkCallOf opens a connection to base with a held call of tool.
func parkCallOf(t *testing.T, base, tool string) net.Conn {
	t.Helper()
	c, host := dialRaw(t, base)
	if _, err := io.WriteString(c, rawModernRequest(host, "1", tool, `{}`)); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestLeanParkedCallsCloseDuringAdmission: the gateway's Close as soon as
// calls are parked (their admissions, on goroutines of their own, still
// running or not begun): Close returns once every parked call ended, each
// connection gets one answer and is closed, no call ran and no request
// was consumed, and no goroutine is left behind.
func TestLeanParkedCallsCloseDuringAdmission(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, nil)
	base, parked := parkedFront(t, f, nil)
	const n = 20
	conns := parkCalls(t, base, n, 1)
	waitParkedCount(t, parked, n)
	if err := f.g.Close(); err != nil {
		t.Fatal(err)
	}
	for i, c := range conns {
		br := bufio.NewReader(c)
		resp, b := readRaw(t, br)
		if resp.StatusCode != http.StatusOK || !resp.Close || !bytes.Contains(b, fmt.Appendf(nil, `"id":%d,`, 1+i)) || !bytes.Contains(b, []byte(`"isError":true`)) {
			t.Errorf("call %d at Close: %d close=%v %s", i, resp.StatusCode, resp.Close, b)
		}
		_ = c.SetReadDeadline(time.Now().Add(testWait))
		if k, err := br.Read(make([]byte, 1)); k != 0 || err == nil {
			t.Errorf("call %d: the connection stayed open after the answer (%d, %v)", i, k, err)
		}
	}
	if k := f.consumedCount(t); k != 0 {
		t.Fatalf("%d requests consumed", k)
	}
	if k := f.h.count("big"); k != 0 {
		t.Fatalf("big ran %d times", k)
	}
}
