package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// verdict is one review to deliver in TestTwoProcessesOneSQLiteFile.
type verdict struct {
	by, token string
	verb      string // approve | deny
	via       string // "A" or "B": whose admin API
}

// TestTwoProcessesOneSQLiteFile runs two `toolgate serve` processes on one
// SQLite file, A and B, with one record file for both upstreams. Calls are
// held on A; two reviews race, one through A's API and one through B's: two
// approvals, an approval and a denial, and the same decision delivered
// twice. Each round: the upstream ran at most once, and the request's final
// state matches what the caller got (result ↔ consumed, isError with the
// reason ↔ denied), and matches the reviews' answers.
func TestTwoProcessesOneSQLiteFile(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "shared.db")
	record := filepath.Join(dir, "record.log")
	cfg := teamConfig(db, upstreamServer(record)+heldEchoPolicy)
	a := startGateway(t, cfg, teamEnv)
	b := startGateway(t, cfg, teamEnv)
	admin := map[string]string{"A": a.Admin, "B": b.Admin}
	cs := a.connect(t, nil, nil)

	bobApproveA := verdict{approverID, approverToken, "approve", "A"}
	bobApproveB := verdict{approverID, approverToken, "approve", "B"}
	bobDenyA := verdict{approverID, approverToken, "deny", "A"}
	bobDenyB := verdict{approverID, approverToken, "deny", "B"}
	carolApproveB := verdict{carolID, carolToken, "approve", "B"}
	carolDenyB := verdict{carolID, carolToken, "deny", "B"}
	carolApproveA := verdict{carolID, carolToken, "approve", "A"}
	scenarios := []struct {
		name  string
		races [2]verdict
	}{
		{"approve and approve", [2]verdict{bobApproveA, carolApproveB}},
		{"approve and deny", [2]verdict{bobApproveA, carolDenyB}},
		{"deny and approve", [2]verdict{bobDenyA, carolApproveB}},
		{"deny and approve, other sides", [2]verdict{bobDenyB, carolApproveA}},
		{"the same approval twice", [2]verdict{bobApproveA, bobApproveB}},
		{"the same denial twice", [2]verdict{bobDenyA, bobDenyB}},
	}
	const rounds = 4
	start := time.Now()
	ran := 0
	for _, sc := range scenarios {
		won := map[string]int{}
		for k := range rounds {
			args := fmt.Sprintf(`{"scenario":%q,"round":%d}`, sc.name, k)
			ch := callAsync(t.Context(), cs, toolCall("t__echo_raw", args))
			p := awaitPendingArgs(t, a.Admin, args)

			answers := raceVerdicts(t.Context(), admin, p.ID, sc.races)
			r := await(t, ch)
			if r.err != nil {
				t.Fatalf("%s #%d: call: %v", sc.name, k, r.err)
			}
			final := fetchApproval(t, b.Admin, p.ID)
			execs := countLines(readRecord(t, record), "echo_raw "+args)
			checkRound(t, fmt.Sprintf("%s #%d (approval %s)", sc.name, k, p.ID), sc.races, answers, r, final, execs, args)
			ran += execs
			won[final.State]++
		}
		t.Logf("%s: final states %v", sc.name, won)
	}
	elapsed(t, fmt.Sprintf("%d rounds of racing reviews through two processes", len(scenarios)*rounds), start)
	if got := readRecord(t, record); len(got) != ran {
		t.Errorf("upstream record has %d lines, want the %d approved calls: %q", len(got), ran, got)
	}
}

// raceVerdicts delivers the two reviews of vs on id at the same moment and
// returns their answers (or errors) in order.
func raceVerdicts(ctx context.Context, admin map[string]string, id string, vs [2]verdict) [2]verdictOrErr {
	var out [2]verdictOrErr
	var wg sync.WaitGroup
	gun := make(chan struct{})
	for i, v := range vs {
		wg.Go(func() {
			var body any
			if v.verb == "deny" {
				body = map[string]string{"reason": "no, says " + v.by}
			}
			<-gun
			out[i].res, out[i].err = postVerdictE(ctx, admin[v.via], v.token, id, v.verb, body)
		})
	}
	close(gun)
	wg.Wait()
	return out
}

type verdictOrErr struct {
	res verdictResult
	err error
}

// checkRound checks one round of TestTwoProcessesOneSQLiteFile.
func checkRound(t *testing.T, name string, vs [2]verdict, answers [2]verdictOrErr, r callResult, final approvalDoc, execs int, args string) {
	t.Helper()
	// Which decision did the reviews' answers report?
	decided := map[string]bool{}
	for i, a := range answers {
		if a.err != nil {
			t.Errorf("%s: %s by %s via %s: %v", name, vs[i].verb, vs[i].by, vs[i].via, a.err)
			continue
		}
		switch a.res.Status {
		case http.StatusOK:
			// A repeated review answers the current state, which may be
			// past the decision already: consumed follows approved.
			st := a.res.Approval.State
			if st == "consumed" {
				st = "approved"
			}
			decided[st] = true
		case http.StatusConflict:
			if vs[0].by == vs[1].by && vs[0].verb == vs[1].verb {
				t.Errorf("%s: the same %s by the same reviewer got 409 %s, want 200 (a repeat is not an error): %s", name, vs[i].verb, a.res.Code, a.res.Body)
			}
		default:
			t.Errorf("%s: %s by %s via %s: %d %s, want 200 or 409", name, vs[i].verb, vs[i].by, vs[i].via, a.res.Status, a.res.Body)
		}
	}
	if decided["pending"] || len(decided) != 1 {
		t.Errorf("%s: the 200 answers report states %v, want exactly one decision", name, decided)
	}
	if execs > 1 {
		t.Errorf("%s: the upstream ran the call %d times", name, execs)
	}
	got := text(r.res)
	switch {
	case !r.res.IsError:
		if got != args || final.State != "consumed" || execs != 1 || !decided["approved"] {
			t.Errorf("%s: the caller got a result %q; the request is %s, the upstream ran it %d times, the reviews reported %v; want its arguments, consumed, once, approved",
				name, got, final.State, execs, decided)
		}
	default:
		reason := "no, says " + final.DecidedBy
		if !strings.Contains(got, "denied") || !strings.Contains(got, reason) || final.State != "denied" || execs != 0 || !decided["denied"] {
			t.Errorf("%s: the caller got isError %q; the request is %s (decided by %s), the upstream ran it %d times, the reviews reported %v; want a denial with reason %q, denied, never run",
				name, got, final.State, final.DecidedBy, execs, decided, reason)
		}
	}
}
