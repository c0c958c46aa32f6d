package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// raceRun is the outcome of one run of TestApproveRacingExpiry.
type raceRun struct {
	args     string
	offset   time.Duration // approve sent at expires_at + offset
	id       string
	approve  verdictResult
	res      *mcp.CallToolResult
	final    string // the request's state after the call returned
	problems []string
}

// TestApproveRacingExpiry sends, 200 times, an approve timed around the
// deadline of a held call (timeout 400ms), with the offset varied from 150ms
// before to 150ms after the stored expires_at. Every run must end in exactly
// one state: approve answered 200 → the call ran upstream exactly once and
// the request is consumed; approve answered 409 → the call timed out, the
// request is expired and the upstream never saw it. Both outcomes must occur,
// or the run proves nothing and fails as inconclusive.
func TestApproveRacingExpiry(t *testing.T) {
	g, record := startUpstreamGateway(t, `
approvals:
  sweep_interval: 50ms
  max_pending_per_principal: 100
policy:
  default: deny
  rules:
    - name: racing
      server: t
      tools: [echo_raw]
      effect: approve
      approval: { timeout: 400ms }
`)
	const (
		runs    = 200
		workers = 8
	)
	sessions := make([]*mcp.ClientSession, 4)
	for i := range sessions {
		sessions[i] = g.connect(t, nil, nil)
	}

	start := time.Now()
	results := make([]raceRun, runs)
	next := make(chan int)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range next {
				results[i] = raceOnce(t.Context(), g, sessions[(w+i)%len(sessions)], i)
			}
		})
	}
	for i := range runs {
		next <- i
	}
	close(next)
	wg.Wait()
	elapsed(t, fmt.Sprintf("%d approve-vs-expiry runs, %d at a time", runs, workers), start)

	lines := readRecord(t, record)
	approved, expired := 0, 0
	for _, r := range results {
		ran := countLines(lines, "echo_raw "+r.args)
		switch r.approve.Status {
		case http.StatusOK:
			approved++
			if ran != 1 {
				r.problems = append(r.problems, fmt.Sprintf("approve answered 200 but the upstream ran the call %d times, want 1", ran))
			}
		case http.StatusConflict:
			expired++
			if ran != 0 {
				r.problems = append(r.problems, fmt.Sprintf("approve answered 409 but the upstream ran the call %d times, want 0", ran))
			}
		}
		if len(r.problems) > 0 {
			t.Errorf("run %s (approve at expires_at%+v, approval %s): %s", r.args, r.offset, r.id, strings.Join(r.problems, "; "))
		}
	}
	t.Logf("outcomes: %d approved and run, %d expired (approve refused)", approved, expired)
	if approved+expired == runs && (approved == 0 || expired == 0) {
		t.Fatalf("inconclusive: %d approved, %d expired; both outcomes must occur", approved, expired)
	}
}

// raceOnce makes one run of TestApproveRacingExpiry: it holds a call with
// arguments {"run":i}, approves it at expires_at + an offset chosen by i,
// and checks what the caller got against the approve's answer and the
// request's final state. It records problems rather than failing, since it
// runs on its own goroutine.
func raceOnce(ctx context.Context, g *gw, cs *mcp.ClientSession, i int) (r raceRun) {
	r.args = fmt.Sprintf(`{"run":%d}`, i)
	// Offsets from -150ms to +150ms in 5ms steps, spread over the runs.
	r.offset = time.Duration((i*37)%61-30) * 5 * time.Millisecond
	fail := func(format string, args ...any) raceRun {
		r.problems = append(r.problems, fmt.Sprintf(format, args...))
		return r
	}
	ch := callAsync(ctx, cs, toolCall("t__echo_raw", r.args))

	// Find the request: pending, or, if the call already returned, in any state.
	deadline := time.Now().Add(waitFor(ctx))
	var a approvalDoc
	for {
		var ok bool
		var err error
		state := "pending"
		if len(ch) > 0 {
			state = "all"
		}
		a, ok, err = findApprovalByArgs(ctx, g.Admin, state, r.args)
		if err != nil {
			return fail("%v", err)
		}
		if ok {
			break
		}
		if state == "all" || time.Now().After(deadline) {
			return fail("no approval request for the call (looked in %s)", state)
		}
		time.Sleep(pollEvery)
	}
	r.id = a.ID

	time.Sleep(time.Until(a.ExpiresAt.Add(r.offset)))
	var err error
	r.approve, err = postVerdictE(ctx, g.Admin, approverToken, a.ID, "approve", nil)
	if err != nil {
		return fail("approve: %v", err)
	}

	var cr callResult
	select {
	case cr = <-ch:
	case <-time.After(waitFor(ctx)):
		return fail("the call did not return within %v", waitFor(ctx))
	}
	if cr.err != nil {
		return fail("the call failed: %v", cr.err)
	}
	r.res = cr.res
	// The request leaves pending by the time the call returns, or soon
	// after: when the held call's own expiry write fails (a loaded machine:
	// "begin: context deadline exceeded"), it answers timed out at once and
	// the sweeper expires the request later.
	settleBy := time.Now().Add(waitFor(ctx))
	for {
		final, err := fetchApprovalE(ctx, g.Admin, a.ID)
		if err != nil {
			return fail("%v", err)
		}
		r.final = final.State
		if r.final != "pending" || time.Now().After(settleBy) {
			break
		}
		time.Sleep(pollEvery)
	}

	got := text(cr.res)
	switch r.approve.Status {
	case http.StatusOK:
		if r.approve.Approval.State != "approved" {
			fail("approve answered 200 with state %q, want approved", r.approve.Approval.State)
		}
		if cr.res.IsError || got != r.args {
			fail("approve answered 200, but the caller got (isError %v) %q, want its arguments back", cr.res.IsError, got)
		}
		if r.final != "consumed" {
			fail("approve answered 200, but the request ended %s, want consumed", r.final)
		}
	case http.StatusConflict:
		if r.approve.Code != "expired" && r.approve.Code != "resolved" {
			fail("approve answered 409 %s, want expired or resolved: %s", r.approve.Code, r.approve.Body)
		}
		if !cr.res.IsError || !strings.Contains(got, "timed out") {
			fail("approve answered 409, but the caller got (isError %v) %q, want a timed-out isError", cr.res.IsError, got)
		}
		if r.final != "expired" {
			fail("approve answered 409, but the request ended %s, want expired", r.final)
		}
	default:
		fail("approve answered %d: %s", r.approve.Status, r.approve.Body)
	}
	return r
}

// TestQuorum holds a call that needs two approvals from group ops, made by
// agent-2 on behalf of alice: bob (not in ops) is not eligible (403), alice
// may not review her own call (403), carol's approval keeps it pending and
// her repeat counts once (200, still pending), and dave's approval releases
// it; the upstream runs once.
func TestQuorum(t *testing.T) {
	g, record := startTeamGateway(t, `
policy:
  default: deny
  rules:
    - name: two from ops
      server: t
      tools: [echo_raw]
      effect: approve
      approval: { timeout: 1m, approvals: 2, approvers: ["group:ops"] }
`)
	cs := g.connectAs(t, agent2Token)
	start := time.Now()
	const args = `{"quorum":2}`
	ch := callAsync(t.Context(), cs, toolCall("t__echo_raw", args))
	a := awaitPendingArgs(t, g.Admin, args)
	if a.RequestedBy != agent2ID || a.OnBehalfOf != aliceID || a.RequiredApprovals != 2 {
		t.Fatalf("pending approval: requested_by %q, on_behalf_of %q, required_approvals %d; want %s, %s, 2",
			a.RequestedBy, a.OnBehalfOf, a.RequiredApprovals, agent2ID, aliceID)
	}

	steps := []struct {
		who, token string
		status     int
		code       string
		state      string // state in a 200 answer
		approvals  int    // approve reviews recorded after the step
	}{
		{who: "bob, not in ops", token: approverToken, status: http.StatusForbidden, code: "not_eligible"},
		{who: "alice, for whom the agent acts", token: aliceToken, status: http.StatusForbidden, code: "self_review"},
		{who: "carol", token: carolToken, status: http.StatusOK, state: "pending", approvals: 1},
		{who: "carol again", token: carolToken, status: http.StatusOK, state: "pending", approvals: 1},
	}
	for _, s := range steps {
		r := postVerdict(t, g.Admin, s.token, a.ID, "approve", nil)
		if r.Status != s.status || r.Code != s.code {
			t.Fatalf("approve by %s: %d %q, want %d %q\n%s", s.who, r.Status, r.Code, s.status, s.code, r.Body)
		}
		cur := fetchApproval(t, g.Admin, a.ID)
		if cur.State != "pending" {
			t.Fatalf("after approve by %s the request is %s, want pending", s.who, cur.State)
		}
		if r.Status == http.StatusOK && r.Approval.State != s.state {
			t.Errorf("approve by %s answered state %q, want %q", s.who, r.Approval.State, s.state)
		}
		if n := len(cur.Reviews); n != s.approvals {
			t.Errorf("after approve by %s the request has %d reviews %+v, want %d", s.who, n, cur.Reviews, s.approvals)
		}
		if len(ch) > 0 {
			t.Fatalf("the call returned after approve by %s, with one approval of two", s.who)
		}
	}
	if got := readRecord(t, record); len(got) != 0 {
		t.Fatalf("upstream ran %q before the quorum was reached", got)
	}

	r := postVerdict(t, g.Admin, daveToken, a.ID, "approve", nil)
	if r.Status != http.StatusOK || r.Approval.State != "approved" || r.Approval.DecidedBy != daveID {
		t.Fatalf("second approval (dave): %d state %q decided_by %q, want 200 approved by dave\n%s", r.Status, r.Approval.State, r.Approval.DecidedBy, r.Body)
	}
	if got := mustOK(t, await(t, ch)); got != args {
		t.Errorf("released call returned %q, want %s", got, args)
	}
	elapsed(t, "quorum of two: refusals, a duplicate, then release", start)
	if got, want := readRecord(t, record), []string{"echo_raw " + args}; !slices.Equal(got, want) {
		t.Errorf("upstream record = %q, want %q", got, want)
	}
	if cur := waitState(t, g.Admin, a.ID, "consumed"); cur.DecidedBy != daveID {
		t.Errorf("consumed request decided_by %q, want %q", cur.DecidedBy, daveID)
	}
}

// TestPinnedHash approves with a pinned arguments_hash: a wrong hash is 409
// hash_mismatch and leaves the request pending; the request's own hash
// approves it and the call runs.
func TestPinnedHash(t *testing.T) {
	g, record := startUpstreamGateway(t, heldEchoPolicy)
	cs := g.connect(t, nil, nil)
	const args = `{"amount":12,"to":"acct-9"}`
	ch := callAsync(t.Context(), cs, toolCall("t__echo_raw", args))
	a := awaitPendingArgs(t, g.Admin, args)
	if !strings.HasPrefix(a.ArgumentsHash, "sha256:") {
		t.Fatalf("arguments_hash %q, want sha256:...", a.ArgumentsHash)
	}
	wrong := "sha256:" + strings.Repeat("0", 64)
	if wrong == a.ArgumentsHash {
		t.Fatal("the wrong hash happens to be the right one")
	}

	r := postVerdict(t, g.Admin, approverToken, a.ID, "approve", map[string]string{"arguments_hash": wrong})
	if r.Status != http.StatusConflict || r.Code != "hash_mismatch" {
		t.Fatalf("approve with a wrong hash: %d %q, want 409 hash_mismatch\n%s", r.Status, r.Code, r.Body)
	}
	if cur := fetchApproval(t, g.Admin, a.ID); cur.State != "pending" || len(cur.Reviews) != 0 {
		t.Fatalf("after a hash mismatch the request is %s with reviews %+v, want pending with none", cur.State, cur.Reviews)
	}
	if len(ch) > 0 {
		t.Fatal("the call returned after an approve with a wrong hash")
	}

	r = postVerdict(t, g.Admin, approverToken, a.ID, "approve", map[string]string{"arguments_hash": a.ArgumentsHash})
	if r.Status != http.StatusOK || r.Approval.State != "approved" {
		t.Fatalf("approve with the right hash: %d state %q, want 200 approved\n%s", r.Status, r.Approval.State, r.Body)
	}
	if got := mustOK(t, await(t, ch)); got != args {
		t.Errorf("released call returned %q, want %s", got, args)
	}
	if got, want := readRecord(t, record), []string{"echo_raw " + args}; !slices.Equal(got, want) {
		t.Errorf("upstream record = %q, want %q", got, want)
	}
}

// TestPendingCap holds two calls under approvals.max_pending_per_principal
// 2: a third is refused at once with an isError naming the cap, and the two
// pending requests and their held calls are untouched.
func TestPendingCap(t *testing.T) {
	g, record := startUpstreamGateway(t, `
approvals:
  max_pending_per_principal: 2
`+heldEchoPolicy)
	cs := g.connect(t, nil, nil)
	held := map[string]<-chan callResult{}
	for _, args := range []string{`{"n":1}`, `{"n":2}`} {
		held[args] = callAsync(t.Context(), cs, toolCall("t__echo_raw", args))
	}
	pending := waitPending(t, g.Admin, 2)

	msg := mustIsError(t, await(t, callAsync(t.Context(), cs, toolCall("t__echo_raw", `{"n":3}`))))
	if !strings.Contains(msg, "max_pending_per_principal") {
		t.Errorf("third call says %q, want it to name approvals.max_pending_per_principal", msg)
	}
	all := approvals(t, g.Admin, "all")
	if len(all) != 2 {
		t.Errorf("%d approval requests exist after the refusal, want the 2 pending: %+v", len(all), all)
	}
	for _, p := range pending {
		if a := fetchApproval(t, g.Admin, p.ID); a.State != "pending" || len(a.Reviews) != 0 {
			t.Errorf("approval %s is %s with reviews %+v after the refusal, want pending and untouched", p.ID, a.State, a.Reviews)
		}
	}
	for args, ch := range held {
		if len(ch) > 0 {
			t.Errorf("held call %s returned when the third was refused", args)
		}
	}
	if got := readRecord(t, record); len(got) != 0 {
		t.Errorf("upstream ran %q", got)
	}

	// The held calls still work: approving one releases it.
	a := awaitPendingArgs(t, g.Admin, `{"n":1}`)
	mustCLI(t, g.Admin, "approve", a.ID)
	if got := mustOK(t, await(t, held[`{"n":1}`])); got != `{"n":1}` {
		t.Errorf("released call returned %q", got)
	}
}

// noApproversPolicy has an approve rule whose approvers list admits nobody
// configured.
const noApproversPolicy = `
policy:
  default: deny
  rules:
    - name: nobody can decide
      server: t
      tools: [echo_raw]
      effect: approve
      approval: { timeout: 1m, approvers: ["group:nobody"] }
`

// TestNoApproversRefusesToStart checks that serve exits 2 naming the rule
// when an approve rule admits no configured approver, and starts when
// approvals.allow_no_approvers is true.
func TestNoApproversRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	cfg := gatewayConfig(filepath.Join(dir, "toolgate.db"), upstreamServer(record)+noApproversPolicy)

	code, stderr := refuseToStart(t, cfg, nil)
	if code != 2 {
		t.Errorf("toolgate serve exited %d, want 2\nstderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, `rules[0] "nobody can decide"`) {
		t.Errorf("stderr does not name the rule (rules[0] \"nobody can decide\"):\n%s", stderr)
	}

	g := startGateway(t, gatewayConfig(filepath.Join(dir, "toolgate2.db"), upstreamServer(record)+`
approvals:
  allow_no_approvers: true
`+noApproversPolicy), nil)
	status, body, err := adminDo(t.Context(), http.MethodGet, g.Admin+"/readyz", "", nil)
	if err != nil || status != http.StatusOK {
		t.Errorf("readyz with allow_no_approvers: %d %s %v, want 200", status, body, err)
	}
	var ready struct{ Status string }
	if json.Unmarshal(body, &ready) != nil || ready.Status != "ok" {
		t.Errorf("readyz body %s, want status ok", body)
	}
}
