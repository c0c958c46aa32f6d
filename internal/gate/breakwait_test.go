package gate

import (
	"bytes"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/store/sqlstore/sqlitetest"
)

// Attacks on the held wait (branch breakwait): the wait on events
// (heldasync.go) and the wait on a goroutine (waitFor).

// steppedClock is the gate's clock (Options.Now) stepped back by back
// from the real one: an NTP correction of the wall clock while calls are
// held.
type steppedClock struct{ back atomic.Int64 }

func (c *steppedClock) now() time.Time {
	return time.Now().Add(-time.Duration(c.back.Load())) //nolint:forbidigo // the clock under test
}

// A wall clock stepped back while a call is held does not leave the call
// held past its MaxHold until its request expires: the deadline's timer
// fires when the clock said the deadline was due, the read finds it not
// yet due by the gate's clock, and the wait sets its timer again for the
// rest. Without that (the deadline's timer fired once, nothing else due)
// the call waits for its request's expiry (an hour here) and its caller
// gets no max-hold answer. Both waits: on events and on a goroutine.
func TestHeldDeadlineSurvivesAClockStepBack(t *testing.T) {
	for _, events := range []bool{true, false} {
		t.Run(fmt.Sprintf("events=%v", events), func(t *testing.T) {
			if !events && heldEventsInTests {
				t.Skip("Admit waits on events here (TOOLGATE_HELD_EVENTS=1)")
			}
			clk := &steppedClock{}
			pol := &swappable{}
			pol.p.Store(testPolicy(time.Hour))
			g := New(sqlitetest.Open(t), pol, &Options{Now: clk.now})
			c := writeCall("/stepped")
			c.MaxHold = 300 * time.Millisecond
			var ch <-chan *Admission
			if events {
				_, ch = holdOnEvents(t, t.Context(), g, c, nil)
			} else {
				ach := make(chan *Admission, 1)
				go func() { a := g.Admit(t.Context(), c); ach <- &a }()
				ch = ach
				waitSelecting(t, "(*Gate).waitFor")
			}
			clk.back.Store(int64(200 * time.Millisecond))
			a := recvHeld(t, ch)
			if a.Allowed || !a.Pending {
				t.Fatalf("answer %+v, want the max-hold pending answer", a)
			}
		})
	}
}

// waitSelecting waits until a goroutine with fn on its stack waits in a
// select (a wait on a goroutine, parked).
func waitSelecting(t *testing.T, fn string) {
	t.Helper()
	for range 2000 {
		buf := make([]byte, 1<<20)
		for _, gr := range bytes.Split(buf[:runtime.Stack(buf, true)], []byte("\n\n")) {
			if bytes.Contains(gr, []byte(fn)) && bytes.Contains(gr, []byte("[select")) {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no goroutine waits in %s", fn)
}
