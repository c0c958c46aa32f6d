package gate

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// heldFrames returns a KeepAlive that sends, on its first call, the
// gate's functions on the calling goroutine's stack (innermost first) to
// the returned channel, leaving out the keep-alive's own closure. A held
// call's first keep-alive comes from the wait itself, so these are the
// frames the call is parked in.
func heldFrames() (func(context.Context, string), <-chan []string) {
	ch := make(chan []string, 1)
	return func(context.Context, string) {
		pcs := make([]uintptr, 64)
		frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
		var names []string
		for {
			f, more := frames.Next()
			if name, ok := strings.CutPrefix(f.Function, "toolgate/internal/gate.(*Gate)."); ok && !strings.HasPrefix(name, "keepAlive.") {
				names = append(names, name)
			}
			if !more {
				break
			}
		}
		select {
		case ch <- names:
		default: // a later keep-alive
		}
	}, ch
}

// checkHeldFrames fails unless a held call waits in Admit, AdmitTo,
// waitHeld, holdOn and waitFor only: the functions that admit it (and keep large
// values in their frames) have returned, so the parked goroutine's stack
// can shrink (docs/performance.md, "Held calls at scale", step 1).
func checkHeldFrames(t *testing.T, got []string) {
	t.Helper()
	want := []string{"waitFor", "holdOn", "waitHeld", "AdmitTo", "Admit"}
	if !slices.Equal(got, want) {
		t.Fatalf("a held call waits in the gate's frames %v, want %v", got, want)
	}
}

func TestHeldCallWaitsInSmallFrames(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	c := writeCall("/a")
	var frames <-chan []string
	c.KeepAlive, frames = heldFrames()
	ch := admitAsync(t.Context(), f.gate, c)
	select {
	case got := <-frames:
		checkHeldFrames(t, got)
	case a := <-ch:
		t.Fatalf("%+v", a)
	}
	r := waitPending(t, f.db, 1)[0]
	if _, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	if a := recv(t, ch); !a.Allowed || a.ApprovalID != r.ID {
		t.Fatalf("admission %+v, want allowed through %s", a, r.ID)
	}
}

// An identical call that takes over an abandoned request (holdTaken)
// waits in the same small frames, and the request's decision reaches it.
func TestTakenOverCallWaitsInSmallFrames(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	gone, leave := context.WithCancelCause(t.Context())
	first := admitAsync(gone, f.gate, writeCall("/a"))
	r := waitPending(t, f.db, 1)[0]
	leave(errors.New("client disconnected"))
	if a := recv(t, first); a.Allowed {
		t.Fatalf("abandoned call admitted: %+v", a)
	}
	c := writeCall("/a")
	var frames <-chan []string
	c.KeepAlive, frames = heldFrames()
	ch := admitAsync(t.Context(), f.gate, c)
	select {
	case got := <-frames:
		checkHeldFrames(t, got)
	case a := <-ch:
		t.Fatalf("%+v", a)
	}
	if _, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	if a := recv(t, ch); !a.Allowed || a.ApprovalID != r.ID {
		t.Fatalf("admission %+v, want allowed through the taken-over %s", a, r.ID)
	}
}
