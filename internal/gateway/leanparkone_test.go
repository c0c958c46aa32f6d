package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// parkedStacks returns the goroutine dump's stacks that contain frame.
func parkedStacks(frame string) []string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte(frame)) {
			out = append(out, string(g))
		}
	}
	return out
}

// goroutineIDs returns the ids of the goroutines of a dump's stacks.
func goroutineIDs(stacks []string) map[string]bool {
	ids := map[string]bool{}
	for _, g := range stacks {
		if f := strings.Fields(g); len(f) > 1 && f[0] == "goroutine" {
			ids[f[1]] = true
		}
	}
	return ids
}

// newGoroutines is the stacks of the goroutines not in existing, except
// those containing frame: what a test that counts goroutines prints when
// the count is over (a flake seen twice in 60 runs under load, cause not
// known yet).
func newGoroutines(existing map[string]bool, frame string) string {
	var b strings.Builder
	for _, g := range parkedStacks("goroutine ") {
		if f := strings.Fields(g); len(f) > 1 && !existing[f[1]] && !strings.Contains(g, frame) {
			b.WriteString(g)
			b.WriteString("\n\n")
		}
	}
	return b.String()
}

// waitParkedCount waits until the park hook counted n parked calls (a
// call's request is pending, admitted on the connection's goroutine,
// just before it is parked).
func waitParkedCount(t *testing.T, parked *atomic.Int64, n int64) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for parked.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls parked, want %d", parked.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLeanParkedCallOneGoroutine: while parked, a held 2026-07-28 call
// costs one goroutine (its waiter), not two: its connection's drop watch
// is the gateway's shared poller (Linux), not a reader goroutine per
// call; and the waiter waits in the gate's WaitHold, the admission
// (its store write) having run on net/http's connection goroutine before
// the call was parked, so that the goroutine that lives for the whole
// hold never grew its stack for it. A drop is still noticed at once, and
// an approval runs the call once. With the wait on the gate's events
// (the default since branch heldwait, gate.Gate.WaitHoldFunc) a parked
// call costs no goroutine at all ("events"); Options.HeldGoroutines
// keeps the waiter ("goroutine").
func TestLeanParkedCallOneGoroutine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the shared poller of parked connections is Linux's (epoll)")
	}
	t.Run("goroutine", func(t *testing.T) { testLeanParkedGoroutines(t, false) })
	t.Run("events", func(t *testing.T) { testLeanParkedGoroutines(t, true) })
}

func testLeanParkedGoroutines(t *testing.T, events bool) {
	t.Helper()
	verifyNoLeaks(t)
	f := newLeanFixtureWith(t, &Options{HeldGoroutines: !events}, &HTTPOptions{DropGrace: time.Hour})
	base, parked := parkedFront(t, f, &HTTPOptions{DropGrace: time.Hour})
	modernPost(t, base, "up__echo", modernCallBody("1", "up__echo", `{}`, ""), nil)
	<-f.h.args

	const k = 12
	waiting := k // waiters per parked call: one, or none on events
	if events {
		waiting = 0
	}
	before := runtime.NumGoroutine()
	existing := goroutineIDs(parkedStacks("goroutine "))
	conns := make([]io.Closer, 0, k)
	for i := range k {
		c, host := dialRaw(t, base)
		if _, err := io.WriteString(c, rawModernRequest(host, fmt.Sprint(10+i), "up__big", fmt.Sprintf(`{"n":%d}`, i))); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	f.waitState(t, approval.StatePending, k)
	var waiters []string
	deadline := time.Now().Add(testWait)
	for {
		waiters = parkedStacks("(*leanHold).waitParked")
		if len(waiters) == waiting && parked.Load() == k && len(parkedStacks("gate.(*Gate).waitFor")) == waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d parked (hook %d), %d waiting in the gate; want %d", len(waiters), parked.Load(), len(parkedStacks("gate.(*Gate).waitFor")), waiting)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if r := parkedStacks("(*connWatch).read"); len(r) != 0 {
		t.Errorf("%d reader goroutines for %d parked calls, want none (the shared poller watches them)", len(r), k)
	}
	for _, w := range waiters {
		if strings.Contains(w, "AdmitTo") || strings.Contains(w, "admitCall") || !strings.Contains(w, "WaitHold") {
			t.Fatalf("a parked call waits below its own admission, want only gate.WaitHold:\n%s", w)
		}
	}
	// One goroutine per parked call (its waiter), or none, and the
	// poller: the connections' goroutines of net/http are gone.
	// Goroutines on their way out (an admission that has just handed its
	// call to the waiter, a connection's goroutine after the hijack) are
	// waited for. The process's own goroutines may come and go meanwhile
	// (database/sql's connection cleaner, an earlier test's last ones: a
	// full package run under -race on a loaded machine once counted 4
	// more with 0 waiters), so up to stray of them are let pass: a
	// goroutine per parked call would be k more.
	const stray = k / 2
	for deadline := time.Now().Add(testWait); ; time.Sleep(5 * time.Millisecond) {
		d := runtime.NumGoroutine() - before
		if d <= waiting+stray {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d more goroutines with %d calls parked, want at most %d (%d waiters, the poller and %d strays); the new ones but the waiters:\n%s",
				d, k, waiting+stray, waiting, stray-1, newGoroutines(existing, "(*leanHold).waitParked"))
		}
	}

	// A drop is noticed by the poller at once (DropGrace is an hour).
	_ = conns[0].Close()
	f.waitState(t, approval.StateCancelled, 1)
	for _, r := range f.waitState(t, approval.StatePending, k-1) {
		if _, err := f.gt.Review(t.Context(), r.ID, approval.Principal{ID: "carol", Kind: "human"}, approval.VerdictApprove, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	// Each approved call's answer, read from its connection: it ran.
	for i, c := range conns[1:] {
		resp, b := readRaw(t, bufio.NewReader(c.(net.Conn)))
		if resp.StatusCode != http.StatusOK || bytes.Contains(b, []byte(`"isError":true`)) {
			t.Fatalf("approved call %d: %d %s", i+1, resp.StatusCode, b)
		}
	}
	if n := f.h.count("big"); n != k-1 {
		t.Fatalf("the approved calls ran %d times, want %d", n, k-1)
	}
}
