package gate

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestRefusalLogStaysBounded (review50): refusalLog holds at most
// refusalLogMax pairs however many principals are refused within a
// minute (every session is a principal of its own); the refusals of
// pairs it had no room for are counted in one pool, logged at once and
// then at most once a minute with their count, and the unlogged counts of
// pairs it forgets are carried into that pool, not lost. On 0c9d0562 the
// map grew by one pair per new principal (5096 here) and swept all of it
// on each.
func TestRefusalLogStaysBounded(t *testing.T) {
	var l refusalLog
	t0 := time.Unix(1000, 0)
	for i := range refusalLogMax {
		if n, ok, pooled := l.due("r", fmt.Sprint("session:", i), t0); !ok || n != 1 || pooled {
			t.Fatalf("pair %d's first refusal: n=%d ok=%v pooled=%v, want logged as 1, its own", i, n, ok, pooled)
		}
	}
	l.due("r", "session:0", t0.Add(time.Second)) // counted, not yet logged
	lines, counted := 0, 0
	for i := range 1000 {
		n, ok, pooled := l.due("r", fmt.Sprint("late:", i), t0.Add(2*time.Second))
		if !pooled {
			t.Fatalf("refusal %d past the bound is not pooled (n=%d ok=%v)", i, n, ok)
		}
		if ok {
			lines++
			counted += n
		}
	}
	if got := len(l.seen); got > refusalLogMax {
		t.Fatalf("refusalLog holds %d pairs, want at most %d", got, refusalLogMax)
	}
	if lines != 1 || counted != 1 {
		t.Errorf("the pool wrote %d lines counting %d refusals within its first minute, want 1 line of 1", lines, counted)
	}
	// A minute on: the idle pairs are forgotten (session:0's unlogged
	// refusal goes to the pool), and the pool's line counts what it
	// held back plus this one.
	later := t0.Add(refusalLogEvery + 3*time.Second)
	n, ok, pooled := l.due("r", "late:0", later)
	if !ok || pooled || n != 1 {
		t.Fatalf("a new pair after the sweep: n=%d ok=%v pooled=%v, want its own first line", n, ok, pooled)
	}
	if got := len(l.seen); got != 1 {
		t.Errorf("after the sweep refusalLog holds %d pairs, want 1", got)
	}
	if want := 999 + 1; l.pool.n != want {
		t.Errorf("the pool holds %d unlogged refusals, want %d (999 pooled, 1 of a forgotten pair)", l.pool.n, want)
	}
}

// TestRefusalLogCountsSurviveShutdown (review50): the quorum refusals
// counted but not yet logged (the line comes at most once a minute) are
// logged in one line when the gate's Run ends, not lost. On 0c9d0562
// the four refusals after agent-1's first line were never logged.
func TestRefusalLogCountsSurviveShutdown(t *testing.T) {
	var logs syncLog
	f := newFixture(t, time.Hour, &Options{Reviewers: financeTeam, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	f.pol.p.Store(financePolicy(3))
	c := Call{Principal: approval.Principal{ID: "agent-1", Kind: "agent", OnBehalfOf: "alice"}, Server: "pay", Tool: "transfer", Arguments: []byte(`{"amount":10}`), ToolDigest: "sha256:d1"}
	for range 5 {
		if a := f.gate.Admit(t.Context(), c); a.Code != CodeQuorumUnreachable {
			t.Fatalf("admission %+v, want refused with %q", a, CodeQuorumUnreachable)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := f.gate.Run(ctx); err != nil {
		t.Fatal(err)
	}
	const want = `msg="approval quorum unreachable; refusals not logged before shutdown" refused=4 pairs=1`
	if !strings.Contains(logs.String(), want) {
		t.Errorf("the log after Run ended lacks %q:\n%s", want, logs.String())
	}
}
