package gateway

import (
	"bufio"
	"bytes"
	"io"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
)

// TestLeanHeldCallRefusedWhenItsRuleIsRevoked (breakheld): a 2026-07-28
// call the lean front holds, parked off its connection and on the
// connection's goroutine (SDK path), carries AdmitUnlessHeld's hand-off
// into the gate, which drops it once decided (heldmem4) and keeps the
// admission's decision for consume. When the policy moves while the call
// is held, to one that denies the tool, the approval no longer runs it:
// the consume evaluates again and refuses, and the upstream is never
// called.
func TestLeanHeldCallRefusedWhenItsRuleIsRevoked(t *testing.T) {
	f := newLeanFixture(t, &HTTPOptions{DropGrace: time.Hour})
	base, parked := parkedFront(t, f, &HTTPOptions{DropGrace: time.Hour})
	sdkBase := serveHTTP(t, f.g, &HTTPOptions{DisableLeanCalls: true})
	orig := f.pol.Load()
	revoke := func() {
		p := *orig
		p.Rules = append([]policy.Rule{{Name: "big is gone", Server: "up", Tools: []string{"big"}, Effect: policy.Deny}}, orig.Rules...)
		f.pol.Store(&p)
	}

	// Parked.
	c, host := dialRaw(t, base)
	if _, err := io.WriteString(c, rawModernRequest(host, "9", "up__big", `{"n":3}`)); err != nil {
		t.Fatal(err)
	}
	f.waitState(t, approval.StatePending, 1)
	waitParkedCount(t, parked, 1)
	revoke()
	f.approveNext(t)
	_, b := readRaw(t, bufio.NewReader(c))
	if !bytes.Contains(b, []byte(`"isError":true`)) {
		t.Errorf("parked: the approved call ran although its rule was revoked while held: %s", b)
	}
	if n := f.h.count("big"); n != 0 {
		t.Fatalf("parked: the upstream ran the revoked call %d times", n)
	}

	// On the connection's goroutine.
	f.pol.Store(orig)
	done := make(chan []byte, 1)
	go func() {
		_, _, sb := modernPost(t, sdkBase, "up__big", modernCallBody("10", "up__big", `{"n":4}`, ""), nil)
		done <- sb
	}()
	f.waitState(t, approval.StatePending, 1)
	revoke()
	f.approveNext(t)
	if sb := <-done; !bytes.Contains(sb, []byte(`"isError":true`)) {
		t.Errorf("SDK path: the approved call ran although its rule was revoked while held: %s", sb)
	}
	if n := f.h.count("big"); n != 0 {
		t.Fatalf("SDK path: the upstream ran the revoked call %d times", n)
	}
}
