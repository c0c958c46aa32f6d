package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// policyStorePrincipals declares agent-1, bob (approver only) and two
// admins, alice and carol, for the store-backed policy tests.
const policyStorePrincipals = `
agents:
  - id: ` + agentID + `
    token_env: E2E_AGENT_TOKEN
approvers:
  - id: ` + approverID + `
    token_env: E2E_APPROVER_TOKEN
    roles: [approver]
  - id: ` + aliceID + `
    token_env: E2E_ALICE_TOKEN
    roles: [admin]
  - id: ` + carolID + `
    token_env: E2E_CAROL_TOKEN
    roles: [admin]
`

// policyStoreApproval is the approval section of every policy below.
const policyStoreApproval = `
  approval: {timeout: 1m, mode: hold, approvals: 1, valid_for: 1m}`

// policyEchoAllowed allows t/echo_raw and denies everything else: the
// config's policy, which becomes revision 1.
const policyEchoAllowed = `
  default: deny` + policyStoreApproval + `
  rules:
    - {name: echo, server: t, tools: [echo_raw], effect: allow}
`

// policyEchoDenied removes the allow rule: it only narrows.
const policyEchoDenied = `
  default: deny` + policyStoreApproval + `
`

// policyAllAllowed changes the default to allow: it widens.
const policyAllAllowed = `
  default: allow` + policyStoreApproval + `
`

// policyNoFoo adds a deny rule to policyEchoAllowed: it only narrows.
const policyNoFoo = policyEchoAllowed + `    - {name: no-foo, server: t, tools: [foo], effect: deny}
`

// policyStoreBody is the servers and policy sections of the test config.
func policyStoreBody(record string) string {
	return upstreamServer(record) + `
policy:
  source: store` + policyEchoAllowed
}

var policyStoreEnv = map[string]string{"E2E_ALICE_TOKEN": aliceToken, "E2E_CAROL_TOKEN": carolToken}

// runToolgate runs `toolgate args...` as a separate process against the
// admin API at addr with token, and returns what it printed and its exit
// status.
func runToolgate(t *testing.T, addr, token string, args ...string) cliResult {
	t.Helper()
	return runToolgateEnv(t, map[string]string{"TOOLGATE_ADDR": addr, "TOOLGATE_TOKEN": token}, args...)
}

// runToolgateEnv runs `toolgate args...` as a separate process with env
// added to this process's environment and returns what it printed and its
// exit status.
func runToolgateEnv(t *testing.T, env map[string]string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitFor(t))
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.toolgate, args...)
	cmd.Env = childEnv()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := cliResult{Stdout: stdout.String(), Stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.Code = ee.ExitCode()
	default:
		t.Fatalf("run toolgate %v: %v", args, err)
	}
	if strings.Contains(res.Stderr, "WARNING: DATA RACE") {
		t.Errorf("toolgate %v reported a data race:\n%s", args, res.Stderr)
	}
	return res
}

// mustToolgate is runToolgate that fails the test unless it exits 0.
func mustToolgate(t *testing.T, addr, token string, args ...string) string {
	t.Helper()
	r := runToolgate(t, addr, token, args...)
	if r.Code != 0 {
		t.Fatalf("toolgate %v: exit %d\nstdout:\n%s\nstderr:\n%s", args, r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// writePolicyFile writes a policy document (the body of a policy: section)
// into dir and returns its path.
func writePolicyFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("policy:"+body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// echoAllowed calls t__echo_raw once and reports whether it ran.
func echoAllowed(t *testing.T, cs *mcp.ClientSession) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitFor(t))
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo_raw", Arguments: json.RawMessage(`{"probe":true}`)})
	if err != nil {
		t.Fatalf("call t__echo_raw: %v", err)
	}
	return !res.IsError
}

// waitEcho polls until t__echo_raw through cs is allowed (want) or not.
func waitEcho(t *testing.T, cs *mcp.ClientSession, want bool, what string) {
	t.Helper()
	deadline := time.Now().Add(waitFor(t))
	for echoAllowed(t, cs) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: t__echo_raw allowed is still %v after %v", what, !want, waitFor(t))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var approvalIDRe = regexp.MustCompile(`approval required: ([0-9a-f-]{36})`)

// TestPolicyStoreSQLite runs the store-backed policy scenario on two
// `toolgate serve` processes sharing one SQLite file.
func TestPolicyStoreSQLite(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "shared.db")
	cfg := `
listen:
  mcp: 127.0.0.1:0
  admin: 127.0.0.1:0
storage:
  driver: sqlite
  path: ` + q(db) + `
` + policyStorePrincipals + policyStoreBody(filepath.Join(dir, "record.log"))
	a := startGateway(t, cfg, policyStoreEnv)
	b := startGateway(t, cfg, policyStoreEnv)
	policyStoreScenario(t, a, b)
}

// policyStorePostgres starts two gateways with policy.source: store on one
// fresh Postgres database, whose storage.poll is poll.
func policyStorePostgres(t *testing.T, poll string) (a, b *gw) {
	t.Helper()
	dsn := freshPGDatabase(t, pgTestDSN(t))
	cfg := `
listen:
  mcp: 127.0.0.1:0
  admin: 127.0.0.1:0
storage:
  driver: postgres
  dsn: "${DATABASE_URL}"
  max_conns: 4
  poll: ` + poll + `
` + policyStorePrincipals + policyStoreBody(filepath.Join(t.TempDir(), "record.log"))
	env := map[string]string{"DATABASE_URL": dsn}
	for k, v := range policyStoreEnv {
		env[k] = v
	}
	return startGateway(t, cfg, env), startGateway(t, cfg, env)
}

// TestPolicyStorePostgres runs the same scenario on two processes sharing
// one Postgres database.
func TestPolicyStorePostgres(t *testing.T) {
	a, b := policyStorePostgres(t, "1s")
	policyStoreScenario(t, a, b)
}

// policyStoreScenario: a and b serve one store with policy.source: store.
// Proposals go to a; the agent calls through b, so every change of effect
// it sees was picked up from the store.
func policyStoreScenario(t *testing.T, a, b *gw) {
	t.Helper()
	dir := t.TempDir()
	cs := b.connect(t, nil, nil)
	if !echoAllowed(t, cs) {
		t.Fatal("revision 1 (the config's policy): t__echo_raw is refused on b, want allowed")
	}
	if out := mustToolgate(t, b.Admin, approverToken, "policy", "show"); !strings.Contains(out, "revision:   1\n") {
		t.Fatalf("policy show on b:\n%s\nwant revision 1", out)
	}

	// A narrowing proposal applies at once, and b follows.
	out := mustToolgate(t, a.Admin, aliceToken, "policy", "propose", writePolicyFile(t, dir, "narrow.yaml", policyEchoDenied))
	if !strings.Contains(out, "applied: revision 2") {
		t.Fatalf("narrowing proposal:\n%s\nwant applied as revision 2", out)
	}
	waitEcho(t, cs, false, "after the narrowing revision 2")

	// A widening proposal waits for a second admin.
	out = mustToolgate(t, a.Admin, aliceToken, "policy", "propose", "--base", "2", writePolicyFile(t, dir, "wide.yaml", policyEchoAllowed))
	m := approvalIDRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("widening proposal:\n%s\nwant an approval id", out)
	}
	id := m[1]
	if echoAllowed(t, cs) {
		t.Error("a pending widening proposal applied")
	}
	// The proposer cannot approve it (403), nor can a non-admin approver.
	if r := runToolgate(t, a.Admin, aliceToken, "approvals", "approve", id); r.Code != 1 || !strings.Contains(r.Stderr, "403 self_review") {
		t.Errorf("proposer approves: exit %d\n%s\nwant exit 1 with 403 self_review", r.Code, r.Stderr)
	}
	if r := runToolgate(t, a.Admin, approverToken, "approvals", "approve", id); r.Code != 1 || !strings.Contains(r.Stderr, "403 not_eligible") {
		t.Errorf("non-admin approves: exit %d\n%s\nwant exit 1 with 403 not_eligible", r.Code, r.Stderr)
	}
	// Another admin approves through b; it applies once.
	mustToolgate(t, b.Admin, carolToken, "approvals", "approve", id)
	if st := showJSON(t, a.Admin, id).State; st != "consumed" {
		t.Errorf("approved proposal is %s, want consumed (applied)", st)
	}
	waitEcho(t, cs, true, "after the approved revision 3")
	if out := mustToolgate(t, a.Admin, approverToken, "policy", "show", "--revision", "3"); !strings.Contains(out, "approval:   "+id) || !strings.Contains(out, "by "+aliceID) {
		t.Errorf("policy show --revision 3:\n%s\nwant it through %s, by %s", out, id, aliceID)
	}
	if r := runToolgate(t, a.Admin, carolToken, "policy", "apply", id); r.Code != 1 || !strings.Contains(r.Stderr, "409 not_approved") {
		t.Errorf("second apply: exit %d\n%s\nwant 409 not_approved", r.Code, r.Stderr)
	}
	if out := mustToolgate(t, a.Admin, approverToken, "policy", "diff", "1", "2"); strings.TrimSpace(out) == "" || strings.Contains(out, "decide alike") {
		t.Errorf("policy diff 1 2 printed %q, want the removed rule", out)
	}

	// A widening proposal is invalidated by a concurrent other change.
	out = mustToolgate(t, a.Admin, aliceToken, "policy", "propose", writePolicyFile(t, dir, "all.yaml", policyAllAllowed))
	m = approvalIDRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("second widening proposal:\n%s\nwant an approval id", out)
	}
	id2 := m[1]
	if out := mustToolgate(t, b.Admin, carolToken, "policy", "propose", "--base", "3", writePolicyFile(t, dir, "nofoo.yaml", policyNoFoo)); !strings.Contains(out, "applied: revision 4") {
		t.Fatalf("concurrent narrowing:\n%s\nwant applied as revision 4", out)
	}
	mustToolgate(t, a.Admin, carolToken, "approvals", "approve", id2)
	if got := showJSON(t, a.Admin, id2); got.State != "invalidated" {
		t.Errorf("proposal made on revision 3 and approved after revision 4: %s, want invalidated", got.State)
	}
	if out := mustToolgate(t, b.Admin, approverToken, "policy", "show"); !strings.Contains(out, "revision:   4\n") {
		t.Errorf("current policy on b:\n%s\nwant revision 4", out)
	}
	// A stale base is refused outright.
	if r := runToolgate(t, a.Admin, aliceToken, "policy", "propose", "--base", "3", writePolicyFile(t, dir, "stale.yaml", policyEchoDenied)); r.Code != 1 || !strings.Contains(r.Stderr, "409 policy_moved") {
		t.Errorf("proposal on a stale base: exit %d\n%s\nwant 409 policy_moved", r.Code, r.Stderr)
	}
}
