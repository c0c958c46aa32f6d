//go:build linux

package gateway

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"syscall"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// waitGone waits until gone is closed, failing after testWait.
func waitGone(t *testing.T, gone <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-gone:
	case <-time.After(testWait):
		t.Fatalf("%s: the drop was not noticed", what)
	}
}

// TestConnPollerLoopFails: when the poller's set cannot be waited on
// (EpollWait fails), the drop of a connection watched before is still
// noticed (its watch is handed to a reader goroutine), a connection
// watched after it is watched on a goroutine (watchParked), and stop ends
// both.
func TestConnPollerLoopFails(t *testing.T) {
	verifyNoLeaks(t)
	p, err := newConnPoller(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	fail := make(chan struct{})
	p.epollWait = func(int, []syscall.EpollEvent, int) (int, error) {
		<-fail
		return 0, syscall.EBADF
	}
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		p.run()
	}()
	before, bc := tcpPair(t)
	goneBefore := make(chan struct{})
	wb, ok := p.watch(before, func() { close(goneBefore) })
	if !ok {
		t.Fatal("the poller did not take the connection")
	}
	close(fail)
	<-ran
	g := &Gateway{}
	g.parkPoll.Store(p)
	after, ac := tcpPair(t)
	goneAfter := make(chan struct{})
	wa := g.watchParked(after, func() { close(goneAfter) })

	_ = bc.Close()
	waitGone(t, goneBefore, "watched before the failure")
	_ = ac.Close()
	waitGone(t, goneAfter, "watched after the failure")
	for _, w := range []dropWatch{wb, wa} {
		if got, more := w.stop(); more || len(got) != 0 {
			t.Fatalf("stop after a drop: %q, more %v", got, more)
		}
	}
}

// TestLeanParkedAgainOnThePoller: a held call pipelined behind a parked
// one is parked in its turn on the connection served after the first
// answer (serveRest) and watched by the gateway's poller too (no reader
// goroutine); its client's drop is still noticed at once (DropGrace is an
// hour) and it never runs.
// On the gate's events (the default) the call parked again has no
// waiter goroutine either ("events"); Options.HeldGoroutines keeps one
// ("goroutine").
func TestLeanParkedAgainOnThePoller(t *testing.T) {
	t.Run("goroutine", func(t *testing.T) { testLeanParkedAgain(t, false) })
	t.Run("events", func(t *testing.T) { testLeanParkedAgain(t, true) })
}

func testLeanParkedAgain(t *testing.T, events bool) {
	t.Helper()
	verifyNoLeaks(t)
	opts := &HTTPOptions{DropGrace: time.Hour}
	f := newLeanFixtureWith(t, &Options{HeldGoroutines: !events}, opts)
	waiting := 1
	if events {
		waiting = 0
	}
	base, parked := parkedFront(t, f, opts)
	c, host := dialRaw(t, base)
	if _, err := io.WriteString(c, rawModernRequest(host, "1", "up__big", `{"n":1}`)+rawModernRequest(host, "2", "up__big", `{"n":2}`)); err != nil {
		t.Fatal(err)
	}
	f.approveNext(t)
	if resp, b := readRaw(t, bufio.NewReader(c)); resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"id":1,`)) {
		t.Fatalf("first answer: %d %s", resp.StatusCode, b)
	}
	f.waitState(t, approval.StatePending, 1)
	waitParkedCount(t, parked, 2)
	deadline := time.Now().Add(testWait)
	for len(parkedStacks("(*leanHold).waitParked")) != waiting || len(parkedStacks("gate.(*Gate).waitFor")) != waiting {
		if time.Now().After(deadline) {
			t.Fatal("the second call is not held")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if r := parkedStacks("(*connWatch).read"); len(r) != 0 {
		t.Fatalf("%d reader goroutines for the call parked again, want none (the poller watches it)", len(r))
	}
	_ = c.Close()
	f.waitState(t, approval.StateCancelled, 1)
	if k := f.h.count("big"); k != 1 {
		t.Fatalf("big ran %d times, want 1", k)
	}
}
