package e2e

// End-to-end tests of issue 9's store and gate defects under pressure: caps
// across processes, revocation of approved calls, approvers after a
// reload, thousands of held calls on SQLite, and a Postgres outage in the
// middle of approvals.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// plainBins are toolgate and e2e/heldload built without the race detector,
// for the tests that hold thousands of calls: a -race binary dies past
// 8128 live goroutines. Built once, next to the other binaries.
var plainBins = sync.OnceValues(func() (struct{ toolgate, heldload string }, error) {
	dir := filepath.Dir(bins.toolgate)
	b := struct{ toolgate, heldload string }{filepath.Join(dir, "toolgate-norace"), filepath.Join(dir, "heldload")}
	if err := goBuildWith(b.toolgate, "toolgate/cmd/toolgate", false); err != nil {
		return b, err
	}
	return b, goBuildWith(b.heldload, "toolgate/e2e/heldload", false)
})

// loadResult is one call's answer as e2e/heldload printed it.
type loadResult struct {
	word string // ok, isError or error
	text string
}

// loadProc is a running e2e/heldload process.
type loadProc struct {
	stdout, stderr *syncBuffer
	done           chan struct{}
	err            error // its exit error; read after done
	pid            int
	exitTicks      int64 // its CPU ticks (user + system) at exit; read after done
}

// cpuTicks is heldload's CPU time so far in clock ticks (user + system),
// from /proc while it runs and from its exit status once it has ended.
func (p *loadProc) cpuTicks() int64 {
	select {
	case <-p.done:
		return p.exitTicks
	default:
	}
	if f := statFields(p.pid); f != nil {
		return statField(f, 11) + statField(f, 12)
	}
	<-p.done // it ended between the select and the read
	return p.exitTicks
}

// startLoad runs heldload against mcp as the agent: n concurrent calls of
// tool with arguments {"tag":tag,"i":i}. It is killed on cleanup if it
// still runs.
func startLoad(tb testing.TB, mcpURL, tool, tag string, n int) *loadProc {
	tb.Helper()
	b, err := plainBins()
	if err != nil {
		tb.Fatalf("build: %v", err)
	}
	cmd := exec.Command(b.heldload, "-mcp", mcpURL, "-tool", tool, "-tag", tag, "-n", strconv.Itoa(n))
	cmd.Env = append(childEnv(), "TESTCLIENT_TOKEN="+agentToken)
	return runLoad(tb, cmd)
}

// runLoad starts a heldload command; it is killed on cleanup if it still
// runs.
func runLoad(tb testing.TB, cmd *exec.Cmd) *loadProc {
	tb.Helper()
	p := &loadProc{stdout: new(syncBuffer), stderr: new(syncBuffer), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start heldload: %v", err)
	}
	p.pid = cmd.Process.Pid
	go func() {
		p.err = cmd.Wait()
		if st := cmd.ProcessState; st != nil {
			p.exitTicks = int64((st.UserTime() + st.SystemTime()) * clockTicks / time.Second)
		}
		close(p.done)
	}()
	tb.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// results waits (at most within) for heldload to exit and returns each
// call's answer by i.
func (p *loadProc) results(tb testing.TB, within time.Duration) map[int]loadResult {
	tb.Helper()
	select {
	case <-p.done:
	case <-time.After(within): // a hang guard
		tb.Fatalf("heldload did not finish within %v; stderr:\n%s", within, p.stderr)
	}
	if p.err != nil {
		tb.Fatalf("heldload: %v\nstderr:\n%s", p.err, p.stderr)
	}
	out := map[int]loadResult{}
	for _, line := range strings.Split(strings.TrimSpace(p.stdout.String()), "\n") {
		is, rest, _ := strings.Cut(line, " ")
		word, text, _ := strings.Cut(rest, " ")
		i, err := strconv.Atoi(is)
		if err != nil {
			tb.Fatalf("heldload printed %q", line)
		}
		if _, dup := out[i]; dup {
			tb.Fatalf("heldload answered call %d twice", i)
		}
		out[i] = loadResult{word, text}
	}
	return out
}

// answered returns how many calls heldload has answered so far.
func (p *loadProc) answered() int {
	s := strings.TrimSpace(p.stdout.String())
	if s == "" {
		return 0
	}
	return strings.Count(s, "\n") + 1
}

// listAll lists every approval in state through the admin API, all pages.
func listAll(tb testing.TB, admin, state string) []apiApproval {
	tb.Helper()
	var all []apiApproval
	cursor := ""
	for {
		var page struct {
			Approvals  []apiApproval `json:"approvals"`
			NextCursor string        `json:"next_cursor"`
		}
		q := url.Values{"state": {state}, "limit": {"1000"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		adminGet(tb, admin+"/v1/approvals?"+q.Encode(), &page)
		all = append(all, page.Approvals...)
		if page.NextCursor == "" {
			return all
		}
		cursor = page.NextCursor
	}
}

// approveAll approves ids through the admin API with workers at a time,
// retrying an answer that is neither 200 nor 409 (the store was down) until
// within passes, and returns each id's final status (approveOne: a re-send's
// 409 for an approval whose first attempt landed counts as 200).
func approveAll(ctx context.Context, admin string, ids []string, workers int, within time.Duration) map[string]int {
	return approveAllVia(ctx, nil, admin, ids, workers, within)
}

// approveAllVia is approveAll through hc (nil: a connection per approve,
// postReviewVia).
func approveAllVia(ctx context.Context, hc *http.Client, admin string, ids []string, workers int, within time.Duration) map[string]int {
	var (
		mu     sync.Mutex
		status = map[string]int{}
		next   = make(chan string)
		wg     sync.WaitGroup
	)
	deadline := time.Now().Add(within)
	for range workers {
		wg.Go(func() {
			for id := range next {
				s := approveOne(ctx, hc, admin, id, deadline) // approveall_test.go
				mu.Lock()
				status[id] = s
				mu.Unlock()
			}
		})
	}
	for _, id := range ids {
		next <- id
	}
	close(next)
	wg.Wait()
	return status
}

// argI returns the "i" of a heldload call's display arguments.
func argI(tb testing.TB, a apiApproval) int {
	tb.Helper()
	var v struct{ I *int }
	if err := json.Unmarshal(a.Arguments, &v); err != nil || v.I == nil {
		tb.Fatalf("approval %s arguments %s: no i", a.ID, a.Arguments)
	}
	return *v.I
}

const cappedPolicy = `
approvals:
  max_pending_per_principal: 8
policy:
  default: deny
  rules:
    - name: capped
      server: t
      tools: [echo_raw]
      effect: approve
      approval: { timeout: 2m }
`

// TestPendingCapAcrossProcesses sends 100 gated calls at once, half through
// each of two processes sharing one database, with a cap of 8 per
// principal: exactly 8 are held and 92 refused with a message naming the
// cap, on SQLite and on Postgres (defect 3: the cap was check-then-insert,
// and 100 calls left 83–100 pending).
func TestPendingCapAcrossProcesses(t *testing.T) {
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			dir := t.TempDir()
			record := filepath.Join(dir, "record.log")
			var a, b *gw
			if driver == "sqlite" {
				cfg := gatewayConfig(filepath.Join(dir, "shared.db"), upstreamServer(record)+cappedPolicy)
				a, b = startGateway(t, cfg, nil), startGateway(t, cfg, nil)
			} else {
				dsn := freshPGDatabase(t, pgTestDSN(t))
				a, b = startPGGateway(t, dsn, upstreamServer(record)+cappedPolicy), startPGGateway(t, dsn, upstreamServer(record)+cappedPolicy)
			}
			sessions := []*mcp.ClientSession{a.connect(t, nil, nil), a.connect(t, nil, nil), b.connect(t, nil, nil), b.connect(t, nil, nil)}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			const n = 100
			answers := make(chan callResult, n)
			for i := range n {
				ch := callAsync(ctx, sessions[i%len(sessions)], toolCall("t__echo_raw", fmt.Sprintf(`{"cap":%d}`, i)))
				go func() { answers <- <-ch }()
			}
			for k := range n - 8 {
				r := await(t, answers)
				if msg := mustIsError(t, r); !strings.Contains(msg, "approvals.max_pending_per_principal") {
					t.Fatalf("refusal %d says %q, want it to name approvals.max_pending_per_principal", k, msg)
				}
			}
			if got := waitPending(t, a.Admin, 8); len(got) != 8 {
				t.Fatalf("%d pending", len(got))
			}
			select {
			case r := <-answers:
				t.Fatalf("a held call was answered: (%v, %v)", r.res, r.err)
			default:
			}
			if got := len(approvals(t, b.Admin, "all")); got != 8 {
				t.Errorf("%d approval requests in the store, want the 8 held ones", got)
			}
		})
	}
}

// TestRevokedSessionApprovalDoesNotRun approves a session's call in retry
// mode and then revokes the session: the DELETE reports the approval
// invalidated, the identical re-send does not run, and the request ends
// invalidated with a reason (defect 2: it stayed approved).
func TestRevokedSessionApprovalDoesNotRun(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	cfg := strings.Replace(sessConfig(filepath.Join(dir, "toolgate.db"), record),
		"approval: { timeout: 2m, mode: hold, approvals: 1 }", "approval: { timeout: 2m, mode: retry, approvals: 1 }", 1)
	g := startGateway(t, cfg, spEnv)
	root := sessCreate(t, g.Admin, sessHostToken, map[string]any{"require_approval": map[string]any{"t": []string{"echo_raw"}}})
	cs := g.sessConnect(t, root.Token, nil)
	const args = `{"revoke":"me"}`
	msg := mustIsError(t, await(t, callAsync(t.Context(), cs, toolCall("t__echo_raw", args))))
	if !strings.Contains(msg, "approval required") {
		t.Fatalf("first call says %q, want approval required", msg)
	}
	p := waitPendingArgs(t, g.Admin, args)
	mustReview(t, g.Admin, p.ID, "approve", "")

	status, body := sessHTTP(t, http.MethodDelete, g.Admin+"/v1/sessions/"+root.ID, sessHostToken, nil)
	var rev struct {
		Invalidated []string `json:"invalidated_approvals"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &rev) != nil || !slices.Equal(rev.Invalidated, []string{p.ID}) {
		t.Fatalf("DELETE = %d %s, want 200 naming %s among the invalidated approvals", status, body, p.ID)
	}
	if r := await(t, callAsync(t.Context(), cs, toolCall("t__echo_raw", args))); r.err == nil && !r.res.IsError {
		t.Errorf("the identical re-send after the revocation ran: %q", text(r.res))
	}
	if n := countRecord(t, record, "echo_raw "+args); n != 0 {
		t.Errorf("the upstream ran the call %d times after the revocation", n)
	}
	if a := approvalAt(t, g.Admin, p.ID); a.State != "invalidated" || !strings.Contains(a.Reason, "revoked") {
		t.Errorf("approval is %s (%q), want invalidated because the session was revoked", a.State, a.Reason)
	}
}

// TestSessionPolicyRequestAfterReload changes policy.approval's approvers
// and reloads the policy with SIGHUP: a session's policy request made
// afterwards names the new approvers (defect 4: it used the startup ones).
func TestSessionPolicyRequestAfterReload(t *testing.T) {
	dir := t.TempDir()
	base := withDana(sessConfig(filepath.Join(dir, "toolgate.db"), filepath.Join(dir, "record.log")))
	const from = "approval: { timeout: 2m, mode: hold, approvals: 1 }"
	withApprovers := func(who string) string {
		return strings.Replace(base, from, "approval: { timeout: 2m, mode: hold, approvals: 1, approvers: ["+who+"] }", 1)
	}
	g := startGateway(t, withApprovers(approverID), spEnv)
	root := sessCreate(t, g.Admin, sessHostToken, map[string]any{"tools": []string{"t__echo_raw"}})

	g.writeConfig(t, withApprovers(danaID))
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	g.waitLog(t, "policy reloaded")
	agentBase := strings.TrimSuffix(g.MCP, "/mcp")
	a := spWant(t, agentBase, root.ID, root.Token, map[string]any{"tools": []string{"t"}}, http.StatusAccepted, "approval_required")
	var got struct {
		Approvers []string `json:"approvers"`
	}
	adminGet(t, g.Admin+"/v1/approvals/"+a.ApprovalID, &got)
	if !slices.Equal(got.Approvers, []string{danaID}) {
		t.Errorf("policy request approvers = %v, want [%s] from the reloaded policy", got.Approvers, danaID)
	}
}

// heldScalePolicy holds every call until it is decided: the load program
// sends no progress token, and holding thousands of calls on a loaded
// machine can take longer than approvals.max_hold (50s), after which such
// callers would be answered "pending" instead.
const heldScalePolicy = `
approvals:
  max_pending_per_principal: 20000
  max_pending: 20000
  max_hold: 0s
policy:
  default: deny
  rules:
    - name: held at scale
      server: t
      tools: [echo_raw]
      effect: approve
      approval: { timeout: 10m }
`

// TestFiveThousandHeldCallsSQLite holds 5,000 calls at once on SQLite: all
// pending, none refused; approving all of them runs each exactly once and
// records no outcome unknown (defect 5: 2,793 were refused as "store
// unavailable", approvals ran at 0.7/s, and some ran but were recorded
// unknown).
func TestFiveThousandHeldCallsSQLite(t *testing.T) {
	const n = 5000
	b, err := plainBins()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	// The approvals' timeout is a wall-clock bound too: the first call held
	// must still be pending when the last approval lands (5m55s after it in
	// a loaded run that held the 5,000 in 3m41s); an hour leaves room.
	policy := strings.Replace(heldScalePolicy, "timeout: 10m", "timeout: 1h", 1)
	g := startGatewayBin(t, b.toolgate, gatewayConfig(filepath.Join(dir, "toolgate.db"), upstreamServer(record)+policy), nil, "--log-level", "warn")
	start := time.Now()
	load := startLoad(t, g.MCP, "t__echo_raw", "five-thousand", n)
	// The hang guard is on progress, not on the total: under load (-race,
	// load average 13–39 on 2 cores) holding the 5,000 took 2m26s and
	// 3m41s in two shuffled runs of the package, against the 5 minutes the
	// guard used to allow in all (branch flake20). A hang is no new pending
	// call for stall; a slow machine still makes progress.
	const stall = 2 * time.Minute
	var pending []apiApproval
	for most, moved := 0, time.Now(); ; time.Sleep(200 * time.Millisecond) {
		if k := load.answered(); k > 0 {
			t.Fatalf("%d of %d calls were answered before any approval:\n%s", k, n, firstLines(load.stdout.String(), 5))
		}
		if pending = listAll(t, g.Admin, "pending"); len(pending) == n {
			break
		}
		if len(pending) > most {
			most, moved = len(pending), time.Now()
		} else if time.Since(moved) > stall {
			t.Fatalf("%d of %d calls pending after %v, none more for %v", len(pending), n, time.Since(start).Round(time.Second), stall)
		}
	}
	t.Logf("%d calls held after %v", n, time.Since(start).Round(time.Millisecond))

	start = time.Now()
	ids := make([]string, len(pending))
	for i, a := range pending {
		ids[i] = a.ID
	}
	statuses := approveAll(t.Context(), g.Admin, ids, 16, 5*time.Minute)
	res := load.results(t, 5*time.Minute)
	took := time.Since(start)
	t.Logf("%d approvals and calls done in %v (%.0f/s)", n, took.Round(time.Millisecond), float64(n)/took.Seconds())
	for id, s := range statuses {
		if s != http.StatusOK {
			t.Errorf("approve %s answered %d", id, s)
		}
	}
	counts := map[string]int{}
	for _, line := range readRecord(t, record) {
		counts[line]++
	}
	for i := range n {
		args := fmt.Sprintf(`{"i":%d,"tag":"five-thousand"}`, i)
		if r := res[i]; r.word != "ok" || r.text != args {
			t.Errorf("call %d got %s %q, want ok with its arguments", i, r.word, r.text)
		}
		if c := counts["echo_raw "+args]; c != 1 {
			t.Errorf("call %d ran %d times upstream, want once", i, c)
		}
	}
	for _, a := range listAll(t, g.Admin, "all") {
		if a.State != "consumed" || a.DispatchOutcome != "ok" {
			t.Errorf("approval %s (call %d) is %s/%q, want consumed/ok", a.ID, argI(t, a), a.State, a.DispatchOutcome)
		}
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// TestPostgresOutageDuringApprovals holds 200 calls on Postgres, approves
// them all and stops Postgres for 2 s in the middle: every request whose
// approve answered 200 either ran once or ended invalidated with a reason,
// none is left approved, and no outcome is unknown, since no process died
// (defect 13: one approved call was refused and left approved, and one
// that ran was recorded unknown).
func TestPostgresOutageDuringApprovals(t *testing.T) {
	const n = 200
	cluster := startPGCluster(t)
	record := filepath.Join(t.TempDir(), "record.log")
	policy := strings.Replace(heldScalePolicy, "timeout: 10m", "timeout: 5m", 1)
	g := startPGGateway(t, cluster.DSN(), upstreamServer(record)+policy)
	sessions := []*mcp.ClientSession{g.connect(t, nil, nil), g.connect(t, nil, nil), g.connect(t, nil, nil), g.connect(t, nil, nil)}
	calls := make([]<-chan callResult, n)
	for i := range n {
		calls[i] = callAsync(t.Context(), sessions[i%len(sessions)], toolCall("t__echo_raw", fmt.Sprintf(`{"i":%d,"tag":"outage"}`, i)))
	}
	var pending []apiApproval
	for deadline := time.Now().Add(waitFor(t)); len(pending) < n; time.Sleep(pollEvery) {
		if pending = listAll(t, g.Admin, "pending"); time.Now().After(deadline) {
			t.Fatalf("%d of %d calls pending", len(pending), n)
		}
	}
	ids := make([]string, n)
	for i, a := range pending {
		ids[i] = a.ID
	}

	// The outage starts once a quarter of the approvals answered.
	var (
		statuses map[string]int
		done     = make(chan struct{})
	)
	go func() {
		defer close(done)
		statuses = approveAll(context.WithoutCancel(t.Context()), g.Admin, ids, 16, 2*time.Minute)
	}()
	for quarter := false; !quarter; time.Sleep(pollEvery) {
		quarter = len(listAll(t, g.Admin, "consumed")) >= n/4
	}
	cluster.Stop(t)
	time.Sleep(2 * time.Second) // the outage itself
	cluster.Start(t)
	<-done

	results := make([]callResult, n)
	for i := range n {
		results[i] = await(t, calls[i])
	}
	waitReadyz(t, g.Admin)
	counts := map[string]int{}
	for _, line := range readRecord(t, record) {
		counts[line]++
	}
	// An outcome whose write met the outage is recorded in the background
	// once the store is back ("dispatch outcome recorded after
	// retrying"), possibly after its caller got the result: wait for it.
	final := map[string]apiApproval{}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(pollEvery) {
		clear(final)
		unrecorded := 0
		for _, a := range listAll(t, g.Admin, "all") {
			final[a.ID] = a
			if a.State == "consumed" && a.DispatchOutcome == "" {
				unrecorded++
			}
		}
		if unrecorded == 0 || time.Now().After(deadline) {
			break
		}
	}
	ran, voided := 0, 0
	for _, id := range ids {
		a := final[id]
		i := argI(t, a)
		args := fmt.Sprintf(`{"i":%d,"tag":"outage"}`, i)
		c := counts["echo_raw "+args]
		switch {
		case a.State == "approved" || a.State == "pending":
			t.Errorf("call %d: approval %s left %s", i, id, a.State)
		case a.DispatchOutcome == "unknown":
			t.Errorf("call %d: approval %s recorded outcome unknown, but no process died", i, id)
		case statuses[id] == http.StatusOK && a.State == "consumed":
			ran++
			if c != 1 || a.DispatchOutcome != "ok" {
				t.Errorf("call %d: approve answered 200, consumed, ran %d times upstream (outcome %q); want once, ok", i, c, a.DispatchOutcome)
			}
			if r := results[i]; r.err != nil || r.res.IsError || text(r.res) != args {
				t.Errorf("call %d ran but the caller got (%v, %v)", i, r.res, r.err)
			}
		case statuses[id] == http.StatusOK && a.State == "invalidated":
			voided++
			if a.Reason == "" || c != 0 {
				t.Errorf("call %d: invalidated with reason %q, ran %d times; want a reason and no run", i, a.Reason, c)
			}
		case statuses[id] == http.StatusOK:
			t.Errorf("call %d: approve answered 200, but the approval ended %s", i, a.State)
		default:
			if c != 0 {
				t.Errorf("call %d: approve answered %d, yet it ran %d times", i, statuses[id], c)
			}
		}
	}
	t.Logf("outage during %d approvals: %d ran once, %d invalidated with a reason", n, ran, voided)
	if ran == 0 {
		t.Error("no call ran: the test proves nothing")
	}
}
