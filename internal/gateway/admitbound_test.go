package gateway

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/store"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// waitAcquiring waits until n goroutines wait for one of the gateway's
// admission slots (admitSlots.acquire on their stacks).
func waitAcquiring(t *testing.T, n int) {
	t.Helper()
	buf := make([]byte, 1<<20)
	got := -1
	for deadline := time.Now().Add(testWait); ; time.Sleep(5 * time.Millisecond) {
		for {
			m := runtime.Stack(buf, true)
			if m < len(buf) {
				got = bytes.Count(buf[:m], []byte("gateway.admitSlots.acquire("))
				break
			}
			buf = make([]byte, 2*len(buf))
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls wait for an admission slot, want %d", got, n)
		}
	}
}

// TestHeldCallsAdmittedBoundedUnparked: held calls that are not parked
// (here every call, as for HTTP/2, TLS or a 2025-era call that asked to
// close) are admitted at most the gateway's bound at a time (here 2); the
// others wait for a slot. One whose client drops its connection while it
// waits is never admitted: no request is created for it, it is recorded
// as never admitted (the audit trail), and the calls after it still are
// admitted. The slots are given back once the calls are held (not when
// they are answered), and each approved call runs once with its own
// answer.
func TestHeldCallsAdmittedBoundedUnparked(t *testing.T) {
	verifyNoLeaks(t)
	ba := newBlockingAdmits()
	opts := &HTTPOptions{DropGrace: time.Hour}
	f := newLeanFixtureGK(t, nil, opts, func(gt *gate.Gate) Gatekeeper {
		ba.Gate = gt
		return ba
	})
	f.g.noPark = true
	f.g.admits = newAdmitSlots(2)
	base := serveHTTP(t, f.g, opts)
	// Before the gateway's Close (see open).
	t.Cleanup(ba.open)
	modernPost(t, base, "up__echo", modernCallBody("1", "up__echo", `{}`, ""), nil) // the session's upstream, connected
	<-f.h.args

	const calls, dropped = 5, 3 // call 3 (the second one waiting) drops its connection
	conns := make([]net.Conn, calls)
	for i := range calls {
		c, host := dialRaw(t, base)
		conns[i] = c
		if _, err := io.WriteString(c, rawModernRequest(host, fmt.Sprint(10+i), "up__big", fmt.Sprintf(`{"n":%d}`, 10+i))); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			ba.waitEntered(t, 1, fmt.Sprintf("call %d while %d admissions ran", i, i))
		} else {
			waitAcquiring(t, i-1) // one at a time: the slots' order is the calls'
		}
	}
	if n, slots := ba.inFlight.Load(), len(f.g.admits); n != 2 || slots != 2 {
		t.Fatalf("%d admissions run and %d slots taken, want 2 and 2 (the bound)", n, slots)
	}
	_ = conns[dropped].Close()
	waitAcquiring(t, calls-3)
	want := `{"n":13} refused: context canceled before the call was admitted; nothing was run`
	for deadline := time.Now().Add(testWait); !slices.Equal(ba.unadmittedCalls(), []string{want}); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("recorded as never admitted: %q, want [%q]", ba.unadmittedCalls(), want)
		}
	}
	ba.open()
	ba.waitEntered(t, calls-3, "the calls still waiting, once the first admissions ended")
	f.waitState(t, approval.StatePending, calls-1)
	if m := ba.most.Load(); m != 2 {
		t.Errorf("at most %d admissions ran at once, want 2", m)
	}
	// A slot is given back just after its call's request is stored
	// pending: wait for the last one (on 3eefbceb this read raced it).
	for deadline := time.Now().Add(testWait); len(f.g.admits) != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("%d admission slots taken while the calls are held, want none", len(f.g.admits))
			break
		}
	}
	ba.mu.Lock()
	args := slices.Clone(ba.args)
	ba.mu.Unlock()
	slices.Sort(args)
	if got, want := strings.Join(args, " "), `{"n":10} {"n":11} {"n":12} {"n":14}`; got != want {
		t.Errorf("admitted %s, want %s (without the dropped call's)", got, want)
	}
	all, _, err := f.db.ListRequests(t.Context(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != calls-1 {
		t.Fatalf("%d requests stored, want %d: the dropped call's must not be", len(all), calls-1)
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
}

// TestSDKPathAllowedCallTakesNoSlot: on the SDK path, with every admission
// slot taken (as by held calls whose creation the store does not take), a
// call the policy allows is still answered at once, and one the policy
// would hold waits for a slot; when its agent gives up meanwhile it is
// never admitted: nothing is stored, and it is recorded as never admitted.
func TestSDKPathAllowedCallTakesNoSlot(t *testing.T) {
	verifyNoLeaks(t)
	ba := newBlockingAdmits()
	ba.open()
	opts := &HTTPOptions{DisableLeanCalls: true, DropGrace: time.Hour}
	f := newLeanFixtureGK(t, nil, opts, func(gt *gate.Gate) Gatekeeper {
		ba.Gate = gt
		return ba
	})
	f.g.admits = newAdmitSlots(1)
	f.g.admits <- struct{}{} // the one slot, taken
	t.Cleanup(func() { <-f.g.admits })
	cs := connectHTTP(t, f.base, aliceToken, nil, nil)

	ctx, cancel := context.WithTimeout(t.Context(), testWait)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError {
		t.Fatalf("the allowed call: %v %+v, want its result without a slot", err, res)
	}
	hctx, hcancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(hctx, &mcp.CallToolParams{Name: "up__big", Arguments: map[string]any{"n": 7}})
		done <- err
	}()
	waitAcquiring(t, 1)
	hcancel()
	if err := <-done; err == nil {
		t.Error("the held call given up returned no error")
	}
	want := `{"n":7} refused: context canceled before the call was admitted; nothing was run`
	for deadline := time.Now().Add(testWait); !slices.Equal(ba.unadmittedCalls(), []string{want}); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("recorded as never admitted: %q, want [%q]", ba.unadmittedCalls(), want)
		}
	}
	if n := ba.inFlight.Load() + ba.most.Load(); n != 0 {
		t.Errorf("%d admissions reached the gate's AdmitOrHold, want none", n)
	}
	all, _, err := f.db.ListRequests(t.Context(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 0 {
		t.Errorf("%d requests stored, want none", len(all))
	}
}
