package gate

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// A kaCall counts the keep-alives of one held call and those that came
// after its answer.
type kaCall struct {
	n, late  atomic.Int64
	answered atomic.Bool
	panics   bool // the second keep-alive panics
	// inWait counts the keep-alives sent from inside WaitHoldFunc (on
	// the caller's goroutine, not the beat's); firstInWait is set when
	// the first of all was one of them.
	inWait      atomic.Int64
	firstInWait atomic.Bool
}

func (k *kaCall) keepAlive(context.Context, string) {
	if k.answered.Load() {
		k.late.Add(1)
	}
	n := k.n.Add(1)
	if calledFrom("(*Gate).holdEvents") {
		k.inWait.Add(1)
		if n == 1 {
			k.firstInWait.Store(true)
		}
	}
	if n == 2 && k.panics {
		panic("heldbeat: in a keep-alive")
	}
}

// calledFrom reports whether fn (a function name without its package
// path, e.g. "(*Gate).holdEvents") is on the calling goroutine's stack.
func calledFrom(fn string) bool {
	pc := make([]uintptr, 64)
	frames := runtime.CallersFrames(pc[:runtime.Callers(2, pc)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, "."+fn) {
			return true
		}
		if !more {
			return false
		}
	}
}

// waitKeepAlives waits until k had n keep-alives.
func (k *kaCall) waitKeepAlives(t *testing.T, n int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); k.n.Load() < n; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d keep-alives, want %d", k.n.Load(), n)
		}
	}
}

// TestEventWaitKeepAlivesWithoutGoroutine (issue 13): a held call with
// keep-alives waited for with WaitHoldFunc (the gateway's parked calls
// with a progress token) keeps no goroutine: its first keep-alive is sent
// before WaitHoldFunc returns, the next ones by the gate's beat calling
// back, and none after its answer. Approve, deny, the caller's cancel and
// MaxHold end it as they end any held call; a keep-alive that panics
// refuses the call, as in a wait on a goroutine (waitPanicked).
func TestEventWaitKeepAlivesWithoutGoroutine(t *testing.T) {
	f := newFixture(t, time.Minute, &Options{KeepAlive: 20 * time.Millisecond})
	const n = 8
	kas := make([]*kaCall, n)
	chs := make([]<-chan *Admission, n)
	ids := make([]approval.ID, n)
	cancels := make([]context.CancelFunc, n)
	for i := range n {
		k := &kaCall{panics: i == 5}
		kas[i] = k
		c := writeCall(fmt.Sprintf("/ka-%d", i))
		c.KeepAlive = k.keepAlive
		if i == 3 {
			c.MaxHold = 300 * time.Millisecond
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancels[i] = cancel
		t.Cleanup(cancel)
		var ch <-chan *Admission
		ids[i], ch = holdOnEvents(t, ctx, f.gate, c, nil)
		answered := make(chan *Admission, 4)
		go func() {
			for a := range ch {
				k.answered.Store(true)
				answered <- a
			}
		}()
		chs[i] = answered
	}
	for i, k := range kas {
		if i != 5 { // refused at its second (below)
			k.waitKeepAlives(t, 3)
		}
	}
	if w := parkedStacksOf("(*Gate).waitFor"); w != 0 {
		t.Fatalf("%d held calls wait on a goroutine, want none", w)
	}
	// The first keep-alive is sent inside WaitHoldFunc, the others by the
	// beat's goroutine. (Counting the keep-alives when WaitHoldFunc has
	// returned is not the same: a beat whose slot comes up within a
	// millisecond or two may send the second before the caller looks.)
	for i, k := range kas {
		if got := k.inWait.Load(); got != 1 || !k.firstInWait.Load() {
			t.Errorf("call %d: %d keep-alives sent inside WaitHoldFunc (the first of all: %v), want exactly the first", i, got, k.firstInWait.Load())
		}
	}

	cancels[0]()
	if a := recvHeld(t, chs[0]); a.Allowed {
		t.Errorf("cancelled call allowed: %+v", a)
	}
	if _, err := f.gate.Review(t.Context(), ids[1], alice, approval.VerdictApprove, "ok", ""); err != nil {
		t.Fatal(err)
	}
	a := recvHeld(t, chs[1])
	if !a.Allowed || a.ApprovalID != ids[1] {
		t.Errorf("approved call: %+v, want allowed", a)
	}
	a.Finish(t.Context(), approval.OutcomeOK)
	if _, err := f.gate.Review(t.Context(), ids[2], alice, approval.VerdictDeny, "no", ""); err != nil {
		t.Fatal(err)
	}
	if a := recvHeld(t, chs[2]); a.Allowed || a.ApprovalID != ids[2] {
		t.Errorf("denied call: %+v, want refused", a)
	}
	if a := recvHeld(t, chs[3]); !a.Pending {
		t.Errorf("call past its MaxHold: %+v, want pending", a)
	}
	// The call whose keep-alive panicked is refused, as a panic in a
	// goroutine's wait refuses it; its request stays pending.
	if a := recvHeld(t, chs[5]); a.Allowed || !strings.Contains(a.Message, "internal error") {
		t.Errorf("call whose keep-alive panicked: %+v, want refused (internal error)", a)
	}
	if r, err := f.db.GetRequest(t.Context(), ids[5]); err != nil || r.State != approval.StatePending {
		t.Errorf("request of the call whose keep-alive panicked: %s (%v), want pending", r.State, err)
	}
	// Two more intervals for everyone still held: no late keep-alive
	// for those answered.
	kas[4].waitKeepAlives(t, kas[4].n.Load()+3)
	for _, i := range []int{0, 1, 2, 3, 5} {
		if l := kas[i].late.Load(); l != 0 {
			t.Errorf("call %d: %d keep-alives after its answer", i, l)
		}
	}
	for _, i := range []int{4, 6, 7} {
		if _, err := f.gate.Review(t.Context(), ids[i], alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		a := recvHeld(t, chs[i])
		if !a.Allowed {
			t.Errorf("call %d: %+v, want allowed", i, a)
		}
		a.Finish(t.Context(), approval.OutcomeOK)
	}
	waitNoSteps(t)
}

// parkedStacksOf counts the goroutines whose stack has frame.
func parkedStacksOf(frame string) int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	return bytes.Count(buf, []byte(frame+"("))
}
