package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// TestDecidedParkedCallsAnsweredBounded: parked calls, once approved, are
// answered (run on their upstream, written) at most the answer queue's
// bound at a time (here 2); the other decided calls wait in the queue
// without a goroutine, and each is answered once a running answer ends:
// every call ran exactly once and got its own result, and the queue is
// empty afterwards.
func TestDecidedParkedCallsAnsweredBounded(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, &HTTPOptions{DropGrace: time.Hour})
	release := make(chan struct{})
	released := false
	open := func() {
		if !released {
			released = true
			close(release)
		}
	}
	var inFlight, most atomic.Int64
	entered := make(chan struct{}, 16)
	f.g.answerQ = newParkQueue(2, func(l *leanHold) {
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		entered <- struct{}{}
		<-release
		inFlight.Add(-1)
		l.answerQueued()
	})
	base, parked := parkedFront(t, f, &HTTPOptions{DropGrace: time.Hour})
	t.Cleanup(open) // before the gateway's Close (cleanups run last first)
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
	for i := range 2 {
		select {
		case <-entered:
		case <-time.After(testWait):
			t.Fatalf("%d of 2 decided calls entered the answer queue's goroutines", i)
		}
	}
	q := f.g.answerQ
	waiting := func() int {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.waiting)
	}
	for deadline := time.Now().Add(testWait); waiting() != calls-2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d decided calls wait in the queue, want %d", waiting(), calls-2)
		}
	}
	if n := f.h.count("big"); n != 0 || inFlight.Load() != 2 {
		t.Fatalf("before the release: %d runs, %d answers in flight; want 0 and 2 (the bound)", n, inFlight.Load())
	}
	open()
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(testWait))
		resp, b := readRaw(t, bufio.NewReader(c))
		if want := `"text":"` + bigText(10+i) + `"`; resp.StatusCode != 200 || !bytes.Contains(b, []byte(want)) || bytes.Contains(b, []byte(`"isError":true`)) {
			t.Errorf("call %d: %d %s, want its own result", i, resp.StatusCode, b)
		}
	}
	if n := f.h.count("big"); n != calls {
		t.Errorf("the approved calls ran %d times, want %d", n, calls)
	}
	if m := most.Load(); m != 2 {
		t.Errorf("at most %d answers ran at once, want 2", m)
	}
	// The last answering goroutine ends after its answer is written.
	for deadline := time.Now().Add(testWait); ; time.Sleep(5 * time.Millisecond) {
		q.mu.Lock()
		running, left := len(q.slots), len(q.waiting)
		q.mu.Unlock()
		if running == 0 && left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the answer queue has %d goroutines and %d calls left, want none", running, left)
		}
	}
}

// TestAnswerQueueUnstalls: with its one goroutine stuck in a call that
// waits for a queued call's answer (an upstream calling back through the
// gateway), the answer queue starts one more goroutine after its stall,
// not before, and both calls end; a queue whose calls keep ending starts
// none past its bound.
func TestAnswerQueueUnstalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first, second := new(leanHold), new(leanHold)
		secondDone := make(chan struct{})
		var ran atomic.Int64
		q := newParkQueue(1, func(l *leanHold) {
			ran.Add(1)
			if l == first {
				<-secondDone // waits for the queued call's answer
				return
			}
			close(secondDone)
		})
		q.stall = time.Second
		q.add(first)
		q.add(second)
		time.Sleep(q.stall - time.Millisecond)
		synctest.Wait()
		if n := ran.Load(); n != 1 {
			t.Fatalf("%d calls ran before the stall, want 1 (the bound)", n)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if n := ran.Load(); n != 2 {
			t.Fatalf("%d calls ran after the stall, want 2", n)
		}
		q.mu.Lock()
		running, waiting := len(q.slots), len(q.waiting)
		q.mu.Unlock()
		if running != 0 || waiting != 0 {
			t.Fatalf("%d goroutines and %d calls left, want none", running, waiting)
		}

		// Calls that end, each within the stall: no goroutine past the bound.
		var inFlight, most atomic.Int64
		q = newParkQueue(1, func(*leanHold) {
			n := inFlight.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(600 * time.Millisecond)
			inFlight.Add(-1)
		})
		q.stall = time.Second
		for range 5 {
			q.add(new(leanHold))
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if m := most.Load(); m != 1 {
			t.Fatalf("%d calls ran at once, want 1: each ended within the stall", m)
		}
	})
}

// TestQueuedStreamAnswerLeavesTheConnection: a 2025-era session's parked
// call answered from the answer queue keeps its connection alive for the
// client's next request, but the answering goroutine does not stay with
// it: with one answering goroutine (and no stall), a second parked call
// on another connection is answered while the first connection stays
// open, and the first connection still serves its next request.
func TestQueuedStreamAnswerLeavesTheConnection(t *testing.T) {
	verifyNoLeaks(t)
	opts := &HTTPOptions{HeartbeatFirst: time.Hour, Heartbeat: time.Hour, DropGrace: time.Hour}
	h := newHooks()
	close(h.release)
	f := newLeanProgFixture(t, ServerConfig{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}, h, time.Hour, opts)
	f.g.answerQ = newParkQueue(1, (*leanHold).answerQueued) // no stall: a stuck goroutine stays stuck
	base, parked := parkedFront(t, f, opts)
	cs := connectHTTP(t, base, aliceToken, nil, nil)
	waitInitialized(t, f.g, cs.ID())
	sid, version := cs.ID(), cs.InitializeResult().ProtocolVersion
	var wires [2]*wireReader
	var conns [2]net.Conn
	for i := range 2 {
		c, host := dialRaw(t, base)
		conns[i], wires[i] = c, newWireReader(c)
		_ = c.SetReadDeadline(time.Now().Add(testWait))
		if _, err := io.WriteString(c, rawSessionPOST(host, sid, version, fmt.Sprintf("h-%d", i), "up__big", fmt.Sprintf(`{"n":%d}`, 10+i), "")); err != nil {
			t.Fatal(err)
		}
		f.waitState(t, approval.StatePending, 1)
		f.approveNext(t)
		var body strings.Builder
		wires[i].response(t, func(l string) { body.WriteString(l) })
		if want := bigText(10 + i); !strings.Contains(body.String(), want) {
			t.Fatalf("call %d answered %q, want its own result", i, body.String())
		}
		f.waitState(t, approval.StateConsumed, i+1)
	}
	if n := parked.Load(); n != 2 {
		t.Fatalf("%d calls parked, want 2", n)
	}
	// The first connection, open all along, serves the client's next request.
	host := strings.TrimPrefix(base, "http://")
	ping := `{"jsonrpc":"2.0","id":"a-1","method":"ping"}`
	if _, err := fmt.Fprintf(conns[0], "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: %s\r\n"+
		"Content-Length: %d\r\n\r\n%s", host, aliceToken, sid, version, len(ping), ping); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	wires[0].response(t, func(l string) { got.WriteString(l) })
	if !strings.Contains(got.String(), `"id":"a-1","result":{}`) {
		t.Errorf("the first connection's next request answered %q, want the ping's result", got.String())
	}
	for _, c := range conns {
		_ = c.Close()
	}
}

// TestAnswerQueueLongToolsStartWithinAStall: 200 decided calls whose tools
// run for a minute each, on the gateway's answer queue bound (128) and
// stall: the 72 past the bound start one stall later, not one a stall
// (the base started the last of them ≈ 72 s late). The memory bound
// holds: 10,000 decided at once, each slowed past the stall (a shared
// writer), never run more than 4 × the bound at once, and all end.
func TestAnswerQueueLongToolsStartWithinAStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var started atomic.Int64
		q := newParkQueue(parkAnswerers, func(*leanHold) {
			started.Add(1)
			time.Sleep(time.Minute)
		})
		q.stall = parkAnswerStall
		const calls = 200
		for range calls {
			q.add(new(leanHold))
		}
		synctest.Wait()
		if n := started.Load(); n != parkAnswerers {
			t.Fatalf("%d long tools started at once, want %d (the bound)", n, parkAnswerers)
		}
		time.Sleep(parkAnswerStall)
		synctest.Wait()
		if n := started.Load(); n != calls {
			t.Errorf("%d of %d long tools started a stall after they were decided, want all", n, calls)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
	})
	synctest.Test(t, func(t *testing.T) {
		var inFlight, most, ran atomic.Int64
		q := newParkQueue(parkAnswerers, func(*leanHold) {
			n := inFlight.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(3 * parkAnswerStall / 2)
			inFlight.Add(-1)
			ran.Add(1)
		})
		q.stall = parkAnswerStall
		const calls = 10_000
		for range calls {
			q.add(new(leanHold))
		}
		for ran.Load() < calls {
			time.Sleep(parkAnswerStall)
		}
		synctest.Wait()
		// The first stall, before any call ended, cannot tell slow calls
		// from stuck ones; after it the calls turn over and a stall adds
		// only as many as fewer than the bound ended in it (here, all
		// ending in step, now and then): never past 4 × the bound.
		if m := most.Load(); m > int64(4*parkAnswerers) {
			t.Errorf("%d answers ran at once under a burst, want at most %d", m, 4*parkAnswerers)
		}
		q.mu.Lock()
		running, waiting := len(q.slots), len(q.waiting)
		q.mu.Unlock()
		if running != 0 || waiting != 0 {
			t.Errorf("%d goroutines and %d calls left, want none", running, waiting)
		}
	})
}

// TestAnswerQueueSlowClientHoldsNoSlot: with a bound of 2, answers
// written to two clients that read slowly (one byte every 29 s of a large
// answer: minutes) hold back the decided calls behind them one stall at
// most, not until their writes end: from then on the quick answers run 2
// at a time (the bound), not 1 (the base's one extra goroutine a stall,
// which stopped adding once the quick answers kept ending).
func TestAnswerQueueSlowClientHoldsNoSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := map[*leanHold]bool{new(leanHold): true, new(leanHold): true}
		var inFlight, most, quick atomic.Int64
		q := newParkQueue(2, func(l *leanHold) {
			if slow[l] {
				time.Sleep(10 * time.Minute)
				return
			}
			n := inFlight.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(600 * time.Millisecond)
			inFlight.Add(-1)
			quick.Add(1)
		})
		q.stall = parkAnswerStall
		for l := range slow {
			q.add(l)
		}
		const calls = 20
		for range calls {
			q.add(new(leanHold))
		}
		// One stall, then 20 answers of 0.6 s two at a time: 6 s.
		time.Sleep(parkAnswerStall + 6*time.Second + 500*time.Millisecond)
		synctest.Wait()
		if n := quick.Load(); n != calls {
			t.Errorf("%d of %d quick answers ran behind two slow clients, want all", n, calls)
		}
		if m := most.Load(); m != 2 {
			t.Errorf("%d quick answers ran at once, want 2 (the bound)", m)
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
	})
}
