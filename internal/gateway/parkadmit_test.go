package gateway

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/store"
)

// blockingAdmits is the gate with its AdmitOrHold (a call's admission)
// held until release is closed (open), counting the admissions in flight
// and the arguments of each call it was asked to admit, and keeping the
// arguments of each call the gateway reported never admitted (each also
// told on refused, when it is not nil).
type blockingAdmits struct {
	*gate.Gate
	release    chan struct{}
	opened     sync.Once
	entered    chan struct{}
	refused    chan struct{}
	inFlight   atomic.Int64
	most       atomic.Int64
	mu         sync.Mutex
	args       []string // guarded by mu
	unadmitted []string // guarded by mu
}

func newBlockingAdmits() *blockingAdmits {
	return &blockingAdmits{release: make(chan struct{}), entered: make(chan struct{}, 64), refused: make(chan struct{}, 64)}
}

// open lets the admissions held and to come through. A test registers it
// as a cleanup after its gateway's (cleanups run last first), so that a
// failure does not leave the gateway's Close waiting for an admission
// held here until the test binary's timeout.
func (b *blockingAdmits) open() { b.opened.Do(func() { close(b.release) }) }

func (b *blockingAdmits) Unadmitted(ctx context.Context, c *gate.Call, reason string) {
	b.mu.Lock()
	b.unadmitted = append(b.unadmitted, string(c.Arguments)+" "+reason)
	b.mu.Unlock()
	b.Gate.Unadmitted(ctx, c, reason)
	if b.refused != nil {
		b.refused <- struct{}{}
	}
}

// waitRefused waits until n more calls were reported never admitted.
func (b *blockingAdmits) waitRefused(t *testing.T, n int, what string) {
	t.Helper()
	waitTold(t, b.refused, n, what, "calls reported never admitted")
}

// waitTold waits for n more sends on ch (each one of what the test counts,
// named by counted), failing the test after testWait.
func waitTold(t *testing.T, ch <-chan struct{}, n int, what, counted string) {
	t.Helper()
	for i := range n {
		select {
		case <-ch:
		case <-time.After(testWait):
			t.Fatalf("%s: %d of %d %s in %v", what, i, n, counted, testWait)
		}
	}
}

// waitQueued waits until n calls wait in q for their admission. The
// front tells of a parked call (parkedFront's count) just before it adds
// the call to the queue, so a test that counts on the queue's order or
// length waits for the queue itself.
func waitQueued(t *testing.T, q *parkQueue, n int) {
	t.Helper()
	waiting := func() int {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.waiting)
	}
	for deadline := time.Now().Add(testWait); waiting() != n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls wait in the admission queue, want %d", waiting(), n)
		}
	}
}

// waitQueueEnded waits until q has no admitting goroutine and no waiting
// call: a goroutine takes the next call, or ends, only after its call's
// admission returned.
func waitQueueEnded(t *testing.T, q *parkQueue) {
	t.Helper()
	left := func() (running, waiting int) {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.slots), len(q.waiting)
	}
	for deadline := time.Now().Add(testWait); ; time.Sleep(time.Millisecond) {
		running, waiting := left()
		if running == 0 && waiting == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the queue has %d admitting goroutines and %d calls left, want none", running, waiting)
		}
	}
}

// unadmittedCalls is what Unadmitted was told so far.
func (b *blockingAdmits) unadmittedCalls() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.unadmitted...)
}

// waitEntered waits until n more admissions entered AdmitOrHold.
func (b *blockingAdmits) waitEntered(t *testing.T, n int, what string) {
	t.Helper()
	waitTold(t, b.entered, n, what, "admissions entered the gate")
}

func (b *blockingAdmits) AdmitOrHold(ctx context.Context, c *gate.Call, adm *gate.Admission) (context.Context, bool) {
	n := b.inFlight.Add(1)
	for m := b.most.Load(); n > m && !b.most.CompareAndSwap(m, n); m = b.most.Load() {
	}
	b.mu.Lock()
	b.args = append(b.args, string(c.Arguments))
	b.mu.Unlock()
	b.entered <- struct{}{}
	<-b.release
	defer b.inFlight.Add(-1)
	return b.Gate.AdmitOrHold(ctx, c, adm)
}

// TestParkedCallsAdmittedBounded: parked calls are admitted at most the
// queue's bound at a time (here 2), in arrival order; the others wait in
// the queue without a goroutine. A queued call whose client drops its
// connection is never admitted: no request is created for it (fail
// closed), while the calls queued after it still are. Each admitted call
// is held, and once approved runs exactly once and gets its own answer.
func TestParkedCallsAdmittedBounded(t *testing.T) {
	verifyNoLeaks(t)
	ba := newBlockingAdmits()
	f := newLeanFixtureGK(t, nil, &HTTPOptions{DropGrace: time.Hour}, func(gt *gate.Gate) Gatekeeper {
		ba.Gate = gt
		return ba
	})
	f.g.parkQ = newParkQueue(2, (*leanHold).admitQueued)
	base, parked := parkedFront(t, f, &HTTPOptions{DropGrace: time.Hour})
	// Before the gateway's Close (see open).
	t.Cleanup(ba.open)
	modernPost(t, base, "up__echo", modernCallBody("1", "up__echo", `{}`, ""), nil) // the session's upstream, connected
	<-f.h.args

	const calls, dropped = 5, 3 // call 3 (the second one queued) drops its connection
	q := f.g.parkQ
	conns := make([]net.Conn, calls)
	for i := range calls {
		c, host := dialRaw(t, base)
		conns[i] = c
		if _, err := io.WriteString(c, rawModernRequest(host, fmt.Sprint(10+i), "up__big", fmt.Sprintf(`{"n":%d}`, 10+i))); err != nil {
			t.Fatal(err)
		}
		waitParkedCount(t, parked, int64(i+1))
		// One at a time, each admitted or queued before the next is sent:
		// the queue's order is the calls'.
		if i < 2 {
			ba.waitEntered(t, 1, fmt.Sprintf("call %d while %d admissions ran", i, i))
		} else {
			waitQueued(t, q, i-1)
		}
	}
	queued := func() []*leanHold {
		q.mu.Lock()
		defer q.mu.Unlock()
		return append([]*leanHold(nil), q.waiting...)
	}
	if w := queued(); len(w) != calls-2 || ba.inFlight.Load() != 2 {
		t.Fatalf("%d calls queued and %d admitting, want %d and 2 (the queue's bound)", len(w), ba.inFlight.Load(), calls-2)
	}
	_ = conns[dropped].Close()
	for deadline := time.Now().Add(testWait); queued()[dropped-2].ctx.Err() == nil; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the queued call whose client dropped was not cancelled")
		}
	}
	ba.open()
	ba.waitEntered(t, calls-3, "the queued calls still there, once the first admissions ended")
	// The dropped call is refused on the goroutine that took it from the
	// queue, which may be after the other goroutine took (and admitted)
	// the call behind it.
	ba.waitRefused(t, 1, "the dropped call")
	f.waitState(t, approval.StatePending, calls-1)
	if m := ba.most.Load(); m != 2 {
		t.Errorf("at most %d admissions ran at once, want 2", m)
	}
	ba.mu.Lock()
	args := strings.Join(ba.args, " ")
	ba.mu.Unlock()
	if want := `{"n":10} {"n":11} {"n":12} {"n":14}`; args != want {
		t.Errorf("admitted %s, want %s (in order, without the dropped call's)", args, want)
	}
	all, _, err := f.db.ListRequests(t.Context(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != calls-1 {
		t.Fatalf("%d requests stored, want %d: the dropped call's must not be", len(all), calls-1)
	}
	if got, want := ba.unadmittedCalls(), `{"n":13} refused: context canceled before the call was admitted; nothing was run`; len(got) != 1 || got[0] != want {
		t.Errorf("recorded as never admitted: %q, want [%q]", got, want)
	}
	for _, r := range all {
		if _, err := f.gt.Review(t.Context(), r.ID, approval.Principal{ID: "carol", Kind: "human"}, approval.VerdictApprove, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range conns {
		if i == dropped {
			continue
		}
		_ = c.SetReadDeadline(time.Now().Add(testWait))
		resp, b := readRaw(t, bufio.NewReader(c))
		if want := `"text":"` + bigText(10+i) + `"`; resp.StatusCode != 200 || !bytes.Contains(b, []byte(want)) || bytes.Contains(b, []byte(`"isError":true`)) {
			t.Errorf("call %d: %d %s, want its own result", i, resp.StatusCode, b)
		}
	}
	if n := f.h.count("big"); n != calls-1 {
		t.Errorf("the approved calls ran %d times, want %d", n, calls-1)
	}
	waitQueueEnded(t, q)
}
