package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// TestLeanParkedCallsApprovedDuringClose (branch breakwait): approvals of
// parked calls waited for on the gate's events race the gateway's Close.
// Every connection gets exactly one answer; every call that ran ran on a
// consumed approval whose outcome is recorded (nothing dispatched after
// shutdown began without its record), at most once; no request is left
// approved but never taken; no goroutine is left behind.
func TestLeanParkedCallsApprovedDuringClose(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, nil)
	base, parked := parkedFront(t, f, nil)
	const n = 30 // under the gate's pending cap per principal (32)
	conns := make([]net.Conn, n)
	for i := range conns {
		c, host := dialRaw(t, base)
		if _, err := io.WriteString(c, rawModernRequest(host, "1", "up__big", fmt.Sprintf(`{"n":%d}`, i+1))); err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	rs := f.waitState(t, approval.StatePending, n)
	waitParkedCount(t, parked, n)
	start, half := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	var reviewed sync.WaitGroup
	reviewed.Add(n / 2)
	for i, r := range rs {
		wg.Go(func() {
			<-start
			if i >= n/2 {
				<-half
			}
			// Close may win: the review then finds the request cancelled
			// or answers it approved for an identical re-send.
			_, _ = f.gt.Review(t.Context(), r.ID, approval.Principal{ID: "carol", Kind: "human"}, approval.VerdictApprove, "", "")
			if i < n/2 {
				reviewed.Done()
			}
		})
	}
	wg.Go(func() {
		// Close once half the approvals are in: the other half race it.
		reviewed.Wait()
		close(half)
		if err := f.g.Close(); err != nil {
			t.Error(err)
		}
	})
	close(start)
	wg.Wait()
	answers := map[string]int{}
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(testWait))
		br := bufio.NewReader(c)
		resp, b := readRaw(t, br)
		answers[string(b[:min(len(b), 80)])]++
		if resp.StatusCode != http.StatusOK {
			t.Errorf("call %d at Close: %d %s", i, resp.StatusCode, b)
		}
		if k, err := br.Read(make([]byte, 1)); k != 0 || err == nil {
			t.Errorf("call %d: more after its one answer (%d, %v)", i, k, err)
		}
	}
	consumed := f.consumedCount(t)
	ok := 0
	for _, o := range f.waitOutcomes(t, consumed) {
		if o == approval.OutcomeOK {
			ok++
		}
	}
	// A dispatch Close cancelled is recorded cancelled_after_dispatch: it
	// may or may not have reached the upstream.
	if ran := f.h.count("big"); ran < ok || ran > consumed {
		t.Fatalf("big ran %d times for %d consumed approvals (%d with outcome ok)", ran, consumed, ok)
	}
	all, _, err := f.db.ListRequests(t.Context(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	states := map[approval.State]int{}
	for _, r := range all {
		states[r.State]++
	}
	t.Logf("after Close: %v; answers %v", states, answers)
}
