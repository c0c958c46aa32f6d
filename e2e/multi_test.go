package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// multiPolicy holds t__echo_raw and t__slow for approval (rules "echo
// needs approval" and "slow needs approval").
const multiPolicy = `
policy:
  default: deny
  rules:
    - name: echo needs approval
      server: t
      tools: [echo_raw]
      effect: approve
      approval: { timeout: 1m }
    - name: slow needs approval
      server: t
      tools: [slow]
      effect: approve
      approval: { timeout: 1m }
`

// multiEnv is the environment of every instance of these tests.
func multiEnv(dsn, hookURL string) map[string]string {
	return map[string]string{"DATABASE_URL": dsn, "HOOK_URL": hookURL, "HOOK_SECRET": hookSecret, "E2E_AUDITOR_TOKEN": auditorToken}
}

// TestThreeInstancesOnePostgres runs three `toolgate serve` processes with
// one config on one Postgres database, as an operator would: agents on A
// and B hold calls at the same time; each is approved through another
// instance (the CLI, a separate process, pointed at C, or the REST API of
// the instance not holding it). Each call runs once, on the instance that
// holds its agent, the agent gets its answer, the audit trail has one
// dispatch per approval, and a webhook receiver that fails every event's
// first attempt accepts each event exactly once (counted by
// Toolgate-Event-Id) across the three outboxes.
func TestThreeInstancesOnePostgres(t *testing.T) {
	dsn := freshPGDatabase(t, pgTestDSN(t))
	rc := startHookReceiver(t, 1)
	record := filepath.Join(t.TempDir(), "record.log")
	body := auditorYAML + upstreamServer(record) + multiPolicy + webhookSection("")
	env := multiEnv(dsn, rc.URL)
	a := startGateway(t, pgGatewayConfig(body), env)
	b := startGateway(t, pgGatewayConfig(body), env)
	c := startGateway(t, pgGatewayConfig(body), env)
	holders := []*gw{a, b}
	sessions := []*mcp.ClientSession{a.connect(t, nil, nil), b.connect(t, nil, nil)}

	const calls = 6
	chs := make([]<-chan callResult, calls)
	argss := make([]string, calls)
	for i := range calls { // all held at once, on both instances
		argss[i] = fmt.Sprintf(`{"multi":%d,"holder":%d}`, i, i%2)
		chs[i] = callAsync(t.Context(), sessions[i%2], toolCall("t__echo_raw", argss[i]))
	}
	ids := make([]string, calls)
	for i := range calls {
		p := awaitPendingArgs(t, c.Admin, argss[i]) // every request, seen through C
		ids[i] = p.ID
		if i%3 == 0 {
			if out := mustCLI(t, c.Admin, "approve", p.ID); !strings.Contains(out, "approved") {
				t.Errorf("approve through the CLI on C printed %q", out)
			}
		} else {
			mustReview(t, holders[(i+1)%2].Admin, p.ID, "approve", "") // the REST API of the other instance
		}
	}
	for i := range calls {
		if got := mustOK(t, await(t, chs[i])); got != argss[i] {
			t.Errorf("call %d returned %q, want %q", i, got, argss[i])
		}
		if n := countRecord(t, record, "echo_raw "+argss[i]); n != 1 {
			t.Errorf("call %d ran %d times, want once", i, n)
		}
	}

	// Each holder dispatched its own calls, and says so.
	for i, id := range ids {
		doc := fetchApproval(t, a.Admin, id)
		if doc.State != "consumed" || doc.DispatchOutcome != "ok" {
			t.Errorf("approval %d (%s): state %s, outcome %q; want consumed, ok", i, id, doc.State, doc.DispatchOutcome)
		}
	}
	held := make([]string, calls) // "Held by" of each call, through C
	for i, id := range ids {
		out := mustCLI(t, c.Admin, "show", id)
		if held[i] = heldByLine(out); held[i] == "" {
			t.Errorf("approvals show %s on C names no holder:\n%s", id, out)
		}
	}
	for i := 2; i < calls; i++ {
		if held[i] != held[i%2] {
			t.Errorf("calls %d and %d came from one agent session but are held by %q and %q", i%2, i, held[i%2], held[i])
		}
	}
	if held[0] == held[1] {
		t.Errorf("calls on A and B name one holder %q", held[0])
	}

	// The audit trail: one dispatch per approval, whichever instance wrote
	// the chain's records (they are appended by one instance at a time).
	dispatched := map[string]int{}
	for deadline := time.Now().Add(waitFor(t)); ; time.Sleep(pollEvery) {
		_, recs := auditExport(t, b.Admin)
		clear(dispatched)
		for _, r := range recs {
			if r.Type == "dispatched" {
				dispatched[r.ApprovalID]++
				if r.Outcome != "ok" {
					t.Errorf("audit: dispatched %s with outcome %q", r.ApprovalID, r.Outcome)
				}
			}
		}
		if len(dispatched) >= calls || time.Now().After(deadline) {
			break
		}
	}
	for _, id := range ids {
		if dispatched[id] != 1 {
			t.Errorf("audit: approval %s dispatched %d times, want 1", id, dispatched[id])
		}
	}
	if r := runToolgateEnv(t, map[string]string{"DATABASE_URL": dsn}, "audit", "verify", "--config", filepath.Join(c.Dir, "toolgate.yaml")); r.Code != 0 || !strings.Contains(r.Stdout, "ok: ") {
		t.Errorf("audit verify: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	// Notifications: requested and approved per call, each accepted once.
	attempts := rc.waitAccepted(t, 2*calls)
	accepted, tries := map[string]int{}, map[string]int{}
	for _, at := range attempts {
		tries[at.EventID]++
		if at.Status == http.StatusOK {
			accepted[at.EventID]++
		}
		if at.SigError != nil {
			t.Errorf("event %s: signature: %v", at.EventID, at.SigError)
		}
	}
	for id, n := range accepted {
		if n != 1 {
			t.Errorf("event %s accepted %d times, want once", id, n)
		}
		if tries[id] != 2 {
			t.Errorf("event %s tried %d times, want 2 (one 500, one 200)", id, tries[id])
		}
	}
	if len(accepted) != 2*calls {
		t.Errorf("%d events accepted, want %d", len(accepted), 2*calls)
	}
}

// heldByLine returns what `approvals show` prints after "Held by:".
func heldByLine(out string) string {
	for l := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "Held by:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				return f[0]
			}
		}
	}
	return ""
}

// killedHolderConfig is the config of TestKilledHolderOnPostgres: short
// leases, a fast sweeper, the default notification events.
func killedHolderConfig(record string) string {
	return pgGatewayConfig(auditorYAML + upstreamServer(record) + multiPolicy + `    - name: progress needs approval, briefly valid
      server: t
      tools: [progress]
      effect: approve
      approval: { timeout: 1m, valid_for: 2s }
approvals:
  lease: 1s
  sweep_interval: 250ms
notify:
  poll: 100ms
  backoff: 100ms
  channels:
    - name: hook
      type: webhook
      url_env: HOOK_URL
      secret_env: HOOK_SECRET
`)
}

// TestKilledHolderOnPostgres: two instances on one database; the one that
// holds an approved call dies (SIGKILL), once between the decision and the
// dispatch (it is stopped with SIGSTOP while the approval is made through
// the other) and once during the dispatch. Between decision and dispatch,
// nothing ran: the agent's identical re-send on the other instance takes
// the approval over and runs the call once. During the dispatch, the other
// instance records the outcome "unknown" once the lease lapses, the
// approver is told (webhook, approvals show), the audit has one dispatch,
// and a re-send does not run it again without a new approval.
func TestKilledHolderOnPostgres(t *testing.T) {
	dsn := freshPGDatabase(t, pgTestDSN(t))
	rc := startHookReceiver(t, 0)
	record := filepath.Join(t.TempDir(), "record.log")
	cfg := killedHolderConfig(record)
	env := multiEnv(dsn, rc.URL)
	b := startGateway(t, cfg, env)
	onB := b.connect(t, nil, nil)

	t.Run("between decision and dispatch", func(t *testing.T) {
		a, kill := startKillableGateway(t, cfg, env)
		const args = `{"case":"stopped-before-dispatch"}`
		ch := callAsync(t.Context(), a.connect(t, nil, nil), toolCall("t__echo_raw", args))
		p := awaitPendingArgs(t, b.Admin, args)
		if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		mustReview(t, b.Admin, p.ID, "approve", "")
		if got := fetchApproval(t, b.Admin, p.ID); got.State != "approved" {
			t.Fatalf("approval is %s while its holder is stopped, want approved", got.State)
		}
		kill()
		if r := await(t, ch); r.err == nil {
			t.Fatalf("the call returned %v after its gateway was killed, want a transport error", text(r.res))
		}
		if n := countRecord(t, record, "echo_raw "+args); n != 0 {
			t.Fatalf("the call ran %d times before its holder died", n)
		}
		// The agent re-sends the identical call on B: after the lease
		// lapses, it takes the approval over and runs once.
		start := time.Now()
		if got := mustOK(t, await(t, callAsync(t.Context(), onB, toolCall("t__echo_raw", args)))); got != args {
			t.Errorf("re-send on B returned %q, want %q", got, args)
		}
		t.Logf("re-send on B answered %v after the kill", time.Since(start).Round(time.Millisecond))
		if n := countRecord(t, record, "echo_raw "+args); n != 1 {
			t.Errorf("the call ran %d times, want once", n)
		}
		if got := fetchApproval(t, b.Admin, p.ID); got.State != "consumed" || got.DispatchOutcome != "ok" {
			t.Errorf("approval %s: state %s, outcome %q; want consumed, ok", p.ID, got.State, got.DispatchOutcome)
		}
		if got := approvals(t, b.Admin, "pending"); len(got) != 0 {
			t.Errorf("the re-send asked for a new approval: %+v", got)
		}
	})

	t.Run("during dispatch", func(t *testing.T) {
		a, kill := startKillableGateway(t, cfg, env)
		const args = `{"case":"killed-in-dispatch"}`
		ch := callAsync(t.Context(), a.connect(t, nil, nil), toolCall("t__slow", args))
		p := awaitPendingArgs(t, b.Admin, args)
		mustCLI(t, b.Admin, "approve", p.ID)
		waitRecord(t, record, "slow started "+args)
		kill()
		if r := await(t, ch); r.err == nil {
			t.Fatalf("the call returned %v after its gateway was killed, want a transport error", text(r.res))
		}
		// B's sweeper records what nobody can know, and the approver hears it.
		rc.waitEvent(t, p.ID, "dispatched", "unknown")
		if got := fetchApproval(t, b.Admin, p.ID); got.State != "consumed" || got.DispatchOutcome != "unknown" {
			t.Errorf("approval %s: state %s, outcome %q; want consumed, unknown", p.ID, got.State, got.DispatchOutcome)
		}
		if out := mustCLI(t, b.Admin, "show", p.ID); !strings.Contains(out, "unknown") {
			t.Errorf("approvals show on B does not say the outcome is unknown:\n%s", out)
		}
		// A re-send of the identical call does not run it again: it asks
		// for a new approval, which is denied here.
		re := callAsync(t.Context(), onB, toolCall("t__slow", args))
		var again apiApproval
		for deadline := time.Now().Add(waitFor(t)); ; time.Sleep(pollEvery) {
			if q := pendingWithArgs(t, b.Admin, args); q != nil {
				again = *q
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the re-send after an unknown outcome asked for no approval")
			}
		}
		if again.ID == p.ID {
			t.Errorf("the re-send reuses approval %s, whose call may have run", p.ID)
		}
		mustReview(t, b.Admin, again.ID, "deny", "may have run already")
		if msg := mustIsError(t, await(t, re)); !strings.Contains(msg, "denied") {
			t.Errorf("denied re-send says %q", msg)
		}
		if n := countRecord(t, record, "slow started "+args); n != 1 {
			t.Errorf("the slow call started %d times, want once", n)
		}
		if got := fetchApproval(t, b.Admin, again.ID); got.State != "denied" {
			t.Errorf("the re-send's approval is %s, want denied", got.State)
		}
		dispatched, outcome := 0, ""
		for deadline := time.Now().Add(waitFor(t)); dispatched == 0 && time.Now().Before(deadline); time.Sleep(pollEvery) {
			_, recs := auditExport(t, b.Admin)
			for _, r := range recs {
				if r.Type == "dispatched" && r.ApprovalID == p.ID {
					dispatched++
					outcome = r.Outcome
				}
			}
		}
		if dispatched != 1 || outcome != "unknown" {
			t.Errorf("audit: approval %s dispatched %d times, last outcome %q; want once, unknown", p.ID, dispatched, outcome)
		}
	})

	t.Run("approved, holder dead, nobody re-sends", func(t *testing.T) {
		a, kill := startKillableGateway(t, cfg, env)
		const args = `{"n":1,"case":"never-re-sent"}`
		ch := callAsync(t.Context(), a.connect(t, nil, nil), toolCall("t__progress", args))
		p := awaitPendingArgs(t, b.Admin, args)
		if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		mustReview(t, b.Admin, p.ID, "approve", "")
		kill()
		if r := await(t, ch); r.err == nil {
			t.Fatalf("the call returned %v after its gateway was killed, want a transport error", text(r.res))
		}
		// The approval is not kept forever, nor dropped silently: once
		// valid_for (2 s) passes it ends, and the approver is told.
		end := approvalAt(t, b.Admin, p.ID)
		for deadline := time.Now().Add(waitFor(t)); end.State == "approved" && time.Now().Before(deadline); time.Sleep(pollEvery) {
			end = approvalAt(t, b.Admin, p.ID)
		}
		t.Logf("approval %s ended %s (%s)", p.ID, end.State, end.Reason)
		if end.State != "expired" {
			t.Fatalf("approval %s is %s, want expired", p.ID, end.State)
		}
		rc.waitEvent(t, p.ID, "expired", "")
		if n := countRecord(t, record, "progress "+args); n != 0 {
			t.Errorf("the call ran %d times, want never", n)
		}
		if out := mustCLI(t, b.Admin, "show", p.ID); !strings.Contains(out, "expired") {
			t.Errorf("approvals show on B:\n%s\nwant it expired", out)
		}
	})

	t.Run("holder stopped with SIGTERM", func(t *testing.T) {
		a, _ := startKillableGateway(t, cfg, env)
		const args = `{"case":"rolling-restart"}`
		ch := callAsync(t.Context(), a.connect(t, nil, nil), toolCall("t__echo_raw", args))
		p := awaitPendingArgs(t, b.Admin, args)
		if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		// The stopping instance answers the held call "the gateway is
		// shutting down" (logged "gateway stopping; approval stays open"),
		// written before the agent's session closes (shutdown37; before,
		// about one run in eight got "request terminated without response").
		if r := await(t, ch); r.err != nil {
			t.Errorf("the held call on the stopping instance ended with a transport error: %v, want that the gateway is shutting down", r.err)
		} else if msg := text(r.res); !r.res.IsError || !strings.Contains(msg, "shutting down") {
			t.Errorf("the held call on the stopping instance was answered %q, want that the gateway is shutting down", msg)
		}
		<-a.exited
		// The claim was released: the identical re-send on B continues the
		// same request (approved before or after it arrives) and runs once.
		start := time.Now()
		re := callAsync(t.Context(), onB, toolCall("t__echo_raw", args))
		mustCLI(t, b.Admin, "approve", p.ID)
		if got := mustOK(t, await(t, re)); got != args {
			t.Errorf("re-send on B returned %q, want %q", got, args)
		}
		t.Logf("re-send on B held, approved and answered %v after the stop", time.Since(start).Round(time.Millisecond))
		if n := countRecord(t, record, "echo_raw "+args); n != 1 {
			t.Errorf("the call ran %d times, want once", n)
		}
		if got := approvals(t, b.Admin, "pending"); len(got) != 0 {
			t.Errorf("the re-send asked for a new approval: %+v", got)
		}
	})
}

// TestPolicyChangeReachesOtherInstance: with policy.source: store on two
// instances sharing Postgres, a narrowing revision made through A is in
// force on B: B refuses the agent's call. The widening that follows (an
// approved proposal, applied through B's approval) comes into force on A.
// How soon is logged, not asserted (never a timed test): that the store's
// announcement wakes the follower instead of its 2 s poll is shown without
// a clock by TestWakeSyncsFollow (policystore, an hour's poll) and
// TestWatchReportsPolicyRevisions (sqlstore, no poll).
func TestPolicyChangeReachesOtherInstance(t *testing.T) {
	dsn := freshPGDatabase(t, pgTestDSN(t))
	dir := t.TempDir()
	cfg := `
listen:
  mcp: 127.0.0.1:0
  admin: 127.0.0.1:0
storage:
  driver: postgres
  dsn: "${DATABASE_URL}"
  max_conns: 4
  poll: 1h
` + policyStorePrincipals + policyStoreBody(filepath.Join(dir, "record.log"))
	env := map[string]string{"DATABASE_URL": dsn}
	for k, v := range policyStoreEnv {
		env[k] = v
	}
	a := startGateway(t, cfg, env)
	b := startGateway(t, cfg, env)
	onA, onB := a.connect(t, nil, nil), b.connect(t, nil, nil)
	if !echoAllowed(t, onB) || !echoAllowed(t, onA) {
		t.Fatal("revision 1: t__echo_raw is refused, want allowed")
	}

	out := mustToolgate(t, a.Admin, aliceToken, "policy", "propose", writePolicyFile(t, dir, "narrow.yaml", policyEchoDenied))
	if !strings.Contains(out, "applied: revision 2") {
		t.Fatalf("narrowing proposal:\n%s\nwant applied as revision 2", out)
	}
	lag := followLag(t, onB, false)
	t.Logf("B refused t__echo_raw %v after the narrowing made through A returned", lag)

	out = mustToolgate(t, b.Admin, aliceToken, "policy", "propose", "--base", "2", writePolicyFile(t, dir, "wide.yaml", policyEchoAllowed))
	m := approvalIDRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("widening proposal:\n%s\nwant an approval id", out)
	}
	mustToolgate(t, b.Admin, carolToken, "approvals", "approve", m[1])
	lag = followLag(t, onA, true)
	t.Logf("A allowed t__echo_raw %v after the widening approved through B returned", lag)
}

// followLag calls t__echo_raw through cs until its being allowed is want,
// and returns how long that took from the first call.
func followLag(t *testing.T, cs *mcp.ClientSession, want bool) time.Duration {
	t.Helper()
	start := time.Now()
	for echoAllowed(t, cs) != want {
		if time.Since(start) > waitFor(t) {
			t.Fatalf("t__echo_raw allowed is still %v after %v", !want, waitFor(t))
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// TestWatchOnOtherInstance: an approver follows the inbox's event stream
// (`toolgate approvals watch`, a process) through instance B while the call
// is held on A: B prints A's request, its approval made through A, and,
// after A is killed mid-dispatch, the outcome "unknown" recorded by B's
// sweeper: the approver sees that the call may have run rather than
// nothing.
func TestWatchOnOtherInstance(t *testing.T) {
	dsn := freshPGDatabase(t, pgTestDSN(t))
	rc := startHookReceiver(t, 0)
	record := filepath.Join(t.TempDir(), "record.log")
	cfg := killedHolderConfig(record)
	env := multiEnv(dsn, rc.URL)
	b := startGateway(t, cfg, env)
	a, kill := startKillableGateway(t, cfg, env)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.toolgate, "approvals", "watch")
	cmd.Env = append(childEnv(), "TOOLGATE_ADDR="+b.Admin, "TOOLGATE_TOKEN="+approverToken)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines, status := make(chan string, 100), make(chan string, 100)
	go pipeLines(stdout, lines)
	go pipeLines(stderr, status)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		if err := <-exited; err != nil {
			t.Logf("approvals watch ended: %v (killed by the test's cancel)", err)
		}
	})
	waitLine(t, status, "watching approvals at", exited)

	const args = `{"case":"watched-from-b"}`
	ch := callAsync(t.Context(), a.connect(t, nil, nil), toolCall("t__slow", args))
	p := awaitPendingArgs(t, a.Admin, args)
	if l := waitLine(t, lines, " requested ", exited); !strings.Contains(l, p.ID) {
		t.Errorf("watch on B printed %q, want A's request %s", l, p.ID)
	}
	mustReview(t, a.Admin, p.ID, "approve", "")
	if l := waitLine(t, lines, " approved ", exited); !strings.Contains(l, p.ID) || !strings.Contains(l, "by "+approverID) {
		t.Errorf("watch on B printed %q for the approval made through A", l)
	}
	waitRecord(t, record, "slow started "+args)
	kill()
	if r := await(t, ch); r.err == nil {
		t.Fatalf("the call returned %v after its gateway was killed, want a transport error", text(r.res))
	}
	if l := waitLine(t, lines, " dispatched ", exited); !strings.Contains(l, p.ID) || !strings.Contains(l, "outcome unknown") {
		t.Errorf("watch on B printed %q, want the dispatch of %s with outcome unknown", l, p.ID)
	}
}
