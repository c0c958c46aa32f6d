package gateway

import (
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestParkedStalledReaderDoesNotHoldTheBeat (attack21): a parked 2025-era
// held call with a progress token whose client stops reading (its socket
// fills with keep-alives) neither stalls the gate's beat nor delays the
// keep-alives of the calls that share its slot: its write that would
// block is the client gone (writeNow), its hold is released after the
// drop grace, and the call beside it gets its keep-alives and, approved,
// its result. Linux only (the file's name): writeNow's non-blocking write
// is Linux's, and syscall.SetsockoptInt takes a Handle on Windows.
func TestParkedStalledReaderDoesNotHoldTheBeat(t *testing.T) {
	verifyNoLeaks(t)
	opts := HTTPOptions{HeartbeatFirst: time.Hour, Heartbeat: time.Hour, DropGrace: time.Millisecond}
	// A 1 ms beat has one slot: every call's keep-alive on one callback run.
	f, base, parked, sid, version := parkedTokenSession(t, time.Millisecond, &opts)

	// The stalled client: a small receive buffer, and it never reads.
	host := strings.TrimPrefix(base, "http://")
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024) })
		if err != nil {
			return err
		}
		return serr
	}}
	stalled, err := d.DialContext(t.Context(), "tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stalled.Close() })
	if _, err := io.WriteString(stalled, rawSessionPOST(host, sid, version, "s-0", "up__big", `{"n":0}`, `{"progressToken":"stalled"}`)); err != nil {
		t.Fatal(err)
	}
	c, _ := dialRaw(t, base)
	if _, err := io.WriteString(c, rawSessionPOST(host, sid, version, "s-1", "up__big", `{"n":1}`, `{"progressToken":1}`)); err != nil {
		t.Fatal(err)
	}
	s := openTokenStream(t, c)
	f.waitState(t, approval.StatePending, 2)
	waitParkedCount(t, parked, 2)

	// The stalled call's hold is released (its write that would block is
	// the client gone) while its connection is still open, and the other
	// keeps getting its keep-alives meanwhile.
	for deadline := time.Now().Add(testWait); ; {
		s.keepAlives(t, 1)
		if r := requestOf(t, f, 0); r.State == approval.StatePending && r.LeaseLapsed(time.Now()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stalled client's call was not let go")
		}
	}
	s.keepAlives(t, 50)
	r := requestOf(t, f, 1)
	if _, err := f.gt.Review(t.Context(), r.ID, approval.Principal{ID: "carol", Kind: "human"}, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	if last := s.rest(t); !strings.Contains(last, `"id":"s-1","result"`) || strings.Contains(last, `"isError":true`) {
		t.Errorf("approved call: last event %s, want its result", last)
	}
	if n := f.h.count("big"); n != 1 {
		t.Errorf("the tool ran %d times, want 1 (the approved call's)", n)
	}
}
