package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLostCommitOfConsumeRunsOnce cuts, between toolgate and Postgres, the
// connection of the transaction that consumes an approved call right after
// Postgres committed it and before its reply reached toolgate (pgCut): the
// approval is consumed, but whoever wrote it saw an error. When the
// decision consumed the held call in its own transaction (the joined
// consume: approved on the instance that holds the call), the approver is
// answered 503 and its retry 200 (duplicate); when the held call consumed
// it itself (approved on another instance), its next attempt finds the
// request consumed. Either way the call runs exactly once and its caller
// gets the result (before consume tokens, the held call found the request
// "consumed" by itself, answered "already used" and never ran it: an
// approved call lost, seen once in TestPostgresOutageDuringApprovals).
// Two calls each way, one after another, each cut once.
func TestLostCommitOfConsumeRunsOnce(t *testing.T) {
	dsn := freshPGDatabase(t, pgTestDSN(t))
	cut, viaCut := startPGCut(t, dsn)
	record := filepath.Join(t.TempDir(), "record.log")
	policy := strings.Replace(heldScalePolicy, "timeout: 10m", "timeout: 5m", 1)
	g := startPGGateway(t, viaCut, upstreamServer(record)+policy)
	// Another instance on the same database, not through the proxy: it
	// decides, and the instance holding the call consumes on its own.
	other := startPGGateway(t, dsn, upstreamServer(filepath.Join(t.TempDir(), "other.log"))+policy)
	cs := g.connect(t, nil, nil)
	paths := map[string]int{}
	for i := range 4 {
		joined := i%2 == 0
		approver := g.Admin
		if !joined {
			approver = other.Admin
		}
		args := fmt.Sprintf(`{"i":%d,"tag":"lost-commit"}`, i)
		ch := callAsync(t.Context(), cs, toolCall("t__echo_raw", args))
		a := waitPendingArgs(t, g.Admin, args)
		cut.arm()
		ctx, cancel := context.WithTimeout(t.Context(), waitFor(t))
		first := postReview(ctx, approver, a.ID, "approve", "ok")
		cancel()
		var res cutResult
		select {
		case res = <-cut.cuts:
		case <-time.After(waitFor(t)):
			t.Fatalf("call %d: no consume's commit was cut (approve answered %d %v)", i, first.Status, first.Err)
		}
		if !res.committed {
			t.Fatalf("call %d: the cut transaction did not commit; the test proves nothing", i)
		}
		switch {
		case first.Err == nil && first.Status == http.StatusOK:
			// The held call's own consume committed unseen (or, on the
			// holding instance, the call was not yet offered to decisions).
			paths["the held call's own consume"]++
		case joined && first.Err == nil && first.Status >= 500:
			// The decision's joined consume committed unseen: the approver
			// is told it failed, and its retry that it is recorded.
			paths["the decision's joined consume"]++
			ctx, cancel := context.WithTimeout(t.Context(), waitFor(t))
			again := postReview(ctx, approver, a.ID, "approve", "ok")
			cancel()
			if again.Err != nil || again.Status != http.StatusOK {
				t.Fatalf("call %d: retried approve answered %d %v, want 200 (duplicate)\n%s", i, again.Status, again.Err, again.Body)
			}
		default:
			t.Fatalf("call %d: approve answered %d %v\n%s", i, first.Status, first.Err, first.Body)
		}
		if got := mustOK(t, await(t, ch)); got != args {
			t.Fatalf("call %d: the caller got %q, want the upstream's echo %q", i, got, args)
		}
		final := waitOutcome(t, g.Admin, a.ID)
		if final.State != "consumed" || final.DispatchOutcome != "ok" {
			t.Fatalf("call %d: approval %s ended %s/%q, want consumed/ok", i, a.ID, final.State, final.DispatchOutcome)
		}
		if n := countRecord(t, record, "echo_raw "+args); n != 1 {
			t.Fatalf("call %d ran %d times upstream, want once", i, n)
		}
	}
	t.Logf("cut commits: %v", paths)
	if paths["the held call's own consume"] < 2 {
		t.Errorf("the held call's own consume was cut %d times, want at least 2 (the approvals on the other instance)", paths["the held call's own consume"])
	}
}

// waitOutcome polls the admin API until approval id has a dispatch outcome
// (recorded after the caller was answered), and returns it.
func waitOutcome(t *testing.T, admin, id string) apiApproval {
	t.Helper()
	deadline := time.Now().Add(waitFor(t))
	for {
		var a apiApproval
		adminGet(t, admin+"/v1/approvals/"+id, &a)
		if a.DispatchOutcome != "" {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("approval %s has no dispatch outcome after %v (state %s)", id, waitFor(t), a.State)
		}
		time.Sleep(pollEvery)
	}
}

// TestLostCommitOfOutcomeRecordedOnce cuts the commit of the write that
// records an approved call's outcome with its result (RecordOutcome)
// after Postgres committed it: the store settles the lost answer by
// reading what it wrote (pgSettleWritten, settle41) and takes it as
// written, or, when it cannot tell, the background retry finds its own
// outcome and result recorded and takes them as written. Before retries
// knew their own outcome, the retry failed with "already resolved",
// logged "cannot record dispatch outcome" at ERROR and wrote the result
// again on its own.
func TestLostCommitOfOutcomeRecordedOnce(t *testing.T) {
	dsn := freshPGDatabase(t, pgTestDSN(t))
	cut, viaCut := startPGCut(t, dsn)
	record := filepath.Join(t.TempDir(), "record.log")
	policy := strings.Replace(heldScalePolicy, "timeout: 10m", "timeout: 5m", 1)
	g := startPGGateway(t, viaCut, upstreamServer(record)+policy)
	cs := g.connect(t, nil, nil)
	args := `{"tag":"lost-outcome"}`
	ch := callAsync(t.Context(), cs, toolCall("t__echo_raw", args))
	a := waitPendingArgs(t, g.Admin, args)
	cut.armLedger()
	ctx, cancel := context.WithTimeout(t.Context(), waitFor(t))
	first := postReview(ctx, g.Admin, a.ID, "approve", "ok")
	cancel()
	if first.Err != nil || first.Status != http.StatusOK {
		t.Fatalf("approve answered %d %v\n%s", first.Status, first.Err, first.Body)
	}
	if got := mustOK(t, await(t, ch)); got != args {
		t.Fatalf("the caller got %q, want the upstream's echo %q", got, args)
	}
	select {
	case res := <-cut.cuts:
		if !res.committed {
			t.Fatal("the cut transaction did not commit; the test proves nothing")
		}
	case <-time.After(waitFor(t)):
		t.Fatal("no ledger write's commit was cut")
	}
	final := waitOutcome(t, g.Admin, a.ID)
	if final.State != "consumed" || final.DispatchOutcome != "ok" {
		t.Fatalf("approval %s ended %s/%q, want consumed/ok", a.ID, final.State, final.DispatchOutcome)
	}
	// The settle's or the retry's own line comes last; wait for it (the
	// caller was answered first).
	deadline := time.Now().Add(waitFor(t))
	recognised := func(log string) bool {
		return strings.Contains(log, "a commit's answer was lost; its rows stand") ||
			strings.Contains(log, "dispatch outcome recorded after retrying")
	}
	for !recognised(g.stderr.String()) {
		if log := g.stderr.String(); strings.Contains(log, "cannot record dispatch outcome\"") {
			t.Fatalf("the retry did not recognise its own outcome:\n%s", log)
		}
		if time.Now().After(deadline) {
			t.Fatalf("neither a settled lost answer nor \"dispatch outcome recorded after retrying\" in the log:\n%s", g.stderr.String())
		}
		time.Sleep(pollEvery)
	}
	if log := g.stderr.String(); strings.Contains(log, "cannot record dispatch outcome\"") {
		t.Fatalf("the retry did not recognise its own outcome:\n%s", log)
	}
	if n := countRecord(t, record, "echo_raw "+args); n != 1 {
		t.Fatalf("the call ran %d times upstream, want once", n)
	}
}
