package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
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

// TestPolicyChangeReachesOtherInstance: with policy.source: store on two
// instances sharing Postgres, a narrowing revision made through A is in
// force on B: B refuses the agent's call. The widening that follows (an
// approved proposal, applied through B's approval) comes into force on A.
// How soon is logged, not asserted (never a timed test): that the store's
// announcement wakes the follower instead of its 2 s poll is shown without
// a clock by TestWakeSyncsFollow (policystore, an hour's poll) and
// TestWatchReportsPolicyRevisions (sqlstore, no poll).
func TestPolicyChangeReachesOtherInstance(t *testing.T) {
	a, b := policyStorePostgres(t, "1h")
	dir := t.TempDir()
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
	a := startGateway(t, cfg, env)

	lines, exited := startWatch(t, b.Admin)

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
	a.kill(t)
	if r := await(t, ch); r.err == nil {
		t.Fatalf("the call returned %v after its gateway was killed, want a transport error", text(r.res))
	}
	if l := waitLine(t, lines, " dispatched ", exited); !strings.Contains(l, p.ID) || !strings.Contains(l, "outcome unknown") {
		t.Errorf("watch on B printed %q, want the dispatch of %s with outcome unknown", l, p.ID)
	}
}
