package gate

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestHeldExpiryIsLogged: a request that expires while its call is held
// (the holder's own deadline expires it, not the sweeper) is logged as
// "approval expired", as the sweeper logs one whose caller had gone. The
// log had "approval requested" and then nothing for it: an operator
// reading the log could not tell a timed-out call from one still waiting.
func TestHeldExpiryIsLogged(t *testing.T) {
	var logs syncLog
	f := newFixture(t, 300*time.Millisecond, &Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	a := f.gate.Admit(t.Context(), writeCall("/a"))
	if !a.Timeout {
		t.Fatalf("admission %+v, want a timeout", a)
	}
	r, err := f.db.GetRequest(t.Context(), a.ApprovalID)
	if err != nil || r.State != approval.StateExpired {
		t.Fatalf("request %+v, %v: want it expired", r, err)
	}
	want := `msg="approval expired" approval=` + string(a.ApprovalID)
	if n := strings.Count(logs.String(), want); n != 1 {
		t.Errorf("the log has %q %d times, want once:\n%s", want, n, logs.String())
	}
}
