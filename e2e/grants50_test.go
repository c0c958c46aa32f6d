package e2e

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// noGrantsPolicy is newuser50's "two people approve EVERY refund over
// 100" in the e2e shape: small echoes take grants, big ones forbid them.
const noGrantsPolicy = `
approvals:
  retry_wait: 0s
grants:
  max_ttl: 2h
policy:
  default: deny
  rules:
    - name: small echoes
      server: t
      tools: [echo_raw]
      when: args.n < 100
      effect: approve
      approval: { timeout: 5m, mode: retry }
    - name: every big echo is approved on its own
      server: t
      tools: [echo_raw]
      when: args.n >= 100
      effect: approve
      approval: { timeout: 5m, mode: retry, grants: false }
`

var grantAnyArgs = regexp.MustCompile(`grant ([0-9a-f-]{36}): agent-1 may call t · echo_raw with any arguments until \S+\n`)

// TestGrantsForbiddenByRuleCLI (branch grants50): an approver remembers a
// small call with no condition (`approvals approve --grant 1h`, a separate
// process), which the CLI says admits any arguments; the grant runs the
// next small call, but a big call, whose rule says grants: false, still
// needs its own approval; approving it with --grant is refused (409
// grants_forbidden, exit 1, nothing recorded) while a plain approve runs
// it; `policy explain` says grants are forbidden for it. SQLite file.
func TestGrantsForbiddenByRuleCLI(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	g := startGateway(t, gatewayConfig(filepath.Join(dir, "tg.db"), upstreamServer(record)+noGrantsPolicy), nil)
	c := retryCaller{t: t, cs: g.connect(t, nil, nil)}

	id := c.required(`{"n":1}`, "approval required")
	out := mustCLI(t, g.Admin, "approve", id, "--grant", "1h")
	m := grantAnyArgs.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("approve --grant with no condition printed %q, want it to say the grant admits any arguments", out)
	}
	grantID := m[1]
	c.ok(`{"n":1}`)
	c.ok(`{"n":2}`) // through the grant

	big := c.required(`{"n":50000}`, "approval required")
	if show := mustCLI(t, g.Admin, "show", big); !strings.Contains(show, "Grants:             forbidden (its rule says grants: false, or the config grants.enabled: false)") {
		t.Errorf("approvals show of a call whose rule says grants: false:\n%s", show)
	}
	res := cli(t, g.Admin, "approve", big, "--grant", "1h")
	if res.Code != 1 || !strings.Contains(res.Stderr, "grants: false") {
		t.Fatalf("approve --grant of a call whose rule says grants: false: exit %d\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, res.Stderr)
	}
	var a apiApproval
	adminGet(t, g.Admin+"/v1/approvals/"+big, &a)
	if a.State != "pending" {
		t.Errorf("after the refused approve --grant the approval is %s, want pending", a.State)
	}
	if gr := grantAt(t, g.Admin, grantID); gr.Uses != 1 {
		t.Errorf("grant uses = %d, want 1 (the small call only)", gr.Uses)
	}
	list := runToolgate(t, g.Admin, approverToken, "grants", "list", "--all")
	if list.Code != 0 || strings.Count(list.Stdout, "echo_raw") != 1 {
		t.Errorf("grants list --all: exit %d, want exactly the one grant\n%s%s", list.Code, list.Stdout, list.Stderr)
	}
	mustCLI(t, g.Admin, "approve", big)
	c.ok(`{"n":50000}`)

	x := runToolgate(t, g.Admin, approverToken, "policy", "explain", "--server", "t", "--tool", "echo_raw", "--args", `{"n":50000}`, "--principal", agentID)
	if x.Code != 0 || !strings.Contains(x.Stdout, "grants:      forbidden (grants: false)") {
		t.Errorf("policy explain of a big call: exit %d\n%s%s", x.Code, x.Stdout, x.Stderr)
	}

	want := map[string]int{`echo_raw {"n":1}`: 1, `echo_raw {"n":2}`: 1, `echo_raw {"n":50000}`: 1}
	got := map[string]int{}
	for _, l := range readRecord(t, record) {
		got[l]++
	}
	for l, n := range want {
		if got[l] != n {
			t.Errorf("upstream ran %q %d times, want %d", l, got[l], n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("upstream ran %v, want %v", got, want)
	}
}

// TestGrantsDisabledCLI (branch grants50): with grants.enabled: false an
// approve with --grant is refused (exit 1, grants_forbidden, nothing
// recorded) and `policy check` accepts the key, `policy explain --config`
// says grants are off.
func TestGrantsDisabledCLI(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	body := upstreamServer(record) + strings.Replace(grantPolicy, "  max_ttl: 2h\n", "  max_ttl: 2h\n  enabled: false\n", 1)
	cfg := gatewayConfig(filepath.Join(dir, "tg.db"), body)
	g := startGateway(t, cfg, nil)
	c := retryCaller{t: t, cs: g.connect(t, nil, nil)}
	id := c.required(`{"n":1}`, "approval required")
	res := cli(t, g.Admin, "approve", id, "--grant", "1h", "--grant-when", "args.n < 10")
	if res.Code != 1 || !strings.Contains(res.Stderr, "grants.enabled: false") {
		t.Fatalf("approve --grant with grants.enabled: false: exit %d\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, res.Stderr)
	}
	var a apiApproval
	adminGet(t, g.Admin+"/v1/approvals/"+id, &a)
	if a.State != "pending" {
		t.Errorf("after the refused approve --grant the approval is %s, want pending", a.State)
	}
	x := runToolgate(t, g.Admin, approverToken, "policy", "explain", "--server", "t", "--tool", "echo_raw", "--args", `{"n":1}`, "--principal", agentID)
	if x.Code != 0 || !strings.Contains(x.Stdout, "grants:      forbidden by the config (grants.enabled: false)") {
		t.Errorf("policy explain with grants.enabled: false: exit %d\n%s%s", x.Code, x.Stdout, x.Stderr)
	}

	// policy check accepts the keys, and refuses a value that is not a
	// boolean (fail closed), naming the line and the key.
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, good, gatewayConfig(filepath.Join(dir, "x.db"), upstreamServer(record)+noGrantsPolicy))
	writeFile(t, bad, gatewayConfig(filepath.Join(dir, "x.db"), upstreamServer(record)+strings.Replace(noGrantsPolicy, "grants: false", "grants: never", 1)))
	if res := runToolgateEnv(t, tokenEnv, "policy", "check", good); res.Code != 0 {
		t.Errorf("policy check of approval.grants: false: exit %d\n%s%s", res.Code, res.Stdout, res.Stderr)
	}
	if res := runToolgateEnv(t, tokenEnv, "policy", "check", bad); res.Code != 2 || !strings.Contains(res.Stderr, `policy.rules[1].approval.grants: "never" is not true or false`) {
		t.Errorf("policy check of approval.grants: never: exit %d, want 2 naming the key\n%s%s", res.Code, res.Stdout, res.Stderr)
	}
}
