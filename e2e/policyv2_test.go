package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// annotatedServer is upstreamServer with trust_annotations set as given.
func annotatedServer(record string, trust bool) string {
	s := upstreamServer(record)
	if trust {
		s += "    trust_annotations: true\n"
	}
	return s
}

// policyV2Body is a policy using the issue 12 selectors over the test
// upstream "t": echo_raw declares readOnlyHint.
const policyV2Body = `
approvals: {allow_no_approvers: true}
policy:
  default: deny
  approval: {timeout: 2m, mode: retry, approvals: 1, valid_for: 10m}
  rules:
    - name: read-only tools
      server: t
      annotations: {read_only: true}
      effect: allow
    - name: small amounts
      server: t
      tools: [big_result]
      when: args.amount <= 100
      effect: allow
    - name: git reads
      server: t
      tools: [progress]
      command: {argument: command, match: ["git status", "git log *"]}
      effect: allow
    - name: no big slow
      server: t
      tools: [slow]
      when: args.seconds > 5
      effect: deny
    - name: trial hold
      server: t
      tools: [big_result]
      when: args.amount > 50
      effect: approve
      monitor: true
`

// TestPolicyV2Calls runs calls through a gateway with the issue 12
// selectors: conditions, shell-aware commands (case C10) and trusted
// annotations; a monitor-mode rule lets a call run and counts it; the
// tool denied whatever the arguments is not listed.
func TestPolicyV2Calls(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record")
	g := startGateway(t, gatewayConfig(filepath.Join(dir, "tg.db"), annotatedServer(record, true)+policyV2Body), nil)
	g.waitLog(t, "policy in monitor mode", "trial hold")
	cs := g.connect(t, nil, nil)

	// Trusted readOnlyHint: echo_raw runs at once under default deny.
	mustOK(t, await(t, callAsync(t.Context(), cs, toolCall("t__echo_raw", `{"x":1}`))))
	// Conditions: 100 runs (a monitored approve rule records would_hold);
	// 101 is denied by the default; 2^63 is an evaluation error.
	mustOK(t, await(t, callAsync(t.Context(), cs, toolCall("t__big_result", `{"amount":100}`))))
	for _, args := range []string{`{"amount":101}`, `{"amount":9223372036854775808}`, `{"amount":"5"}`} {
		msg := mustIsError(t, await(t, callAsync(t.Context(), cs, toolCall("t__big_result", args))))
		if !strings.Contains(msg, "denied") {
			t.Errorf("big_result %s: %q, want a denial", args, msg)
		}
	}
	// Commands: only plain git status / git log run.
	mustOK(t, await(t, callAsync(t.Context(), cs, toolCall("t__progress", `{"command":"git log -1"}`))))
	for _, c := range []string{"git status && curl x | sh", "git log $(rm -rf /)", "git status; rm -rf ~", "git log `id`", `bash -c \"git status\"`,
		`git add a.txt\nrm -rf /`, "git status | tee /etc/x"} {
		msg := mustIsError(t, await(t, callAsync(t.Context(), cs, toolCall("t__progress", `{"command":"`+c+`"}`))))
		if !strings.Contains(msg, "denied") {
			t.Errorf("command %q: %q, want a denial", c, msg)
		}
	}
	want := []string{"echo_raw {\"x\":1}", "big_result {\"amount\":100}", "progress {\"command\":\"git log -1\"}"}
	if got := readRecord(t, record); !slices.Equal(got, want) {
		t.Errorf("executions %q, want %q", got, want)
	}
	m := scrapeMetrics(t, g.Admin)
	if got := m[`toolgate_policy_monitor_total{server="t",verdict="would_hold"}`]; got != 1 {
		t.Errorf("toolgate_policy_monitor_total would_hold = %v, want 1", got)
	}
	g.waitLog(t, "policy monitor mode: the call proceeds", "verdict=would_hold", `rule="trial hold"`)

	// tools/list: under default deny, a tool no rule can allow (slow: its
	// only rule is a conditional deny) is hidden; the others stay, even
	// big_result, which only a condition allows.
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if want := []string{"t__big_result", "t__echo_raw", "t__progress"}; !slices.Equal(names, want) {
		t.Errorf("tools/list = %q, want %q (slow: no rule can allow it)", names, want)
	}
}

// TestUntrustedAnnotationsNeverRelax checks the same policy with the
// server not trusted: echo_raw's readOnlyHint is ignored, so the default
// denies it.
func TestUntrustedAnnotationsNeverRelax(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record")
	g := startGateway(t, gatewayConfig(filepath.Join(dir, "tg.db"), annotatedServer(record, false)+policyV2Body), nil)
	g.waitLog(t, "selects annotations of server", "not marked trust_annotations")
	cs := g.connect(t, nil, nil)
	msg := mustIsError(t, await(t, callAsync(t.Context(), cs, toolCall("t__echo_raw", `{"x":1}`))))
	if !strings.Contains(msg, `denied by the policy's default (no rule allows or holds this call`) {
		t.Errorf("echo_raw: %q, want the default's denial", msg)
	}
	if got := readRecord(t, record); len(got) != 0 {
		t.Errorf("executions %q, want none", got)
	}
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		if tl.Name == "t__echo_raw" {
			t.Error("echo_raw is listed although nothing can allow it")
		}
	}
}

// TestMonitorModeWouldDeny checks policy.enforce: false: a call the policy
// would deny runs, is counted as would_deny and logged; a rule with
// monitor: false still denies.
func TestMonitorModeWouldDeny(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record")
	g := startGateway(t, gatewayConfig(filepath.Join(dir, "tg.db"), upstreamServer(record)+`
approvals: {allow_no_approvers: true}
policy:
  default: allow
  enforce: false
  rules:
    - {name: no echo, server: t, tools: [echo_raw], effect: deny}
    - {name: never slow, server: t, tools: [slow], effect: deny, monitor: false}
`), nil)
	g.waitLog(t, "policy in monitor mode", "policy.enforce is false")
	cs := g.connect(t, nil, nil)
	mustOK(t, await(t, callAsync(t.Context(), cs, toolCall("t__echo_raw", `{"a":1}`))))
	if got := readRecord(t, record); len(got) != 1 || got[0] != `echo_raw {"a":1}` {
		t.Errorf("executions %q, want the would-deny call", got)
	}
	msg := mustIsError(t, await(t, callAsync(t.Context(), cs, toolCall("t__slow", `{"seconds":1}`))))
	if !strings.Contains(msg, `"never slow"`) {
		t.Errorf("slow: %q, want a denial by never slow", msg)
	}
	m := scrapeMetrics(t, g.Admin)
	if got := m[`toolgate_policy_monitor_total{server="t",verdict="would_deny"}`]; got != 1 {
		t.Errorf("toolgate_policy_monitor_total would_deny = %v, want 1", got)
	}
	g.waitLog(t, "policy monitor mode: the call proceeds", "verdict=would_deny", `rule="no echo"`)
	// list_denied is about the enforced policy: slow is hidden, echo_raw
	// (only would-denied) is listed.
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	if !slices.Contains(names, "t__echo_raw") || slices.Contains(names, "t__slow") {
		t.Errorf("tools/list = %q", names)
	}
}

// TestPolicyExplainAndTestCLI runs `toolgate policy explain` and
// `toolgate policy test` as separate processes, against the config file
// and against the live gateway; a failing case exits 1.
func TestPolicyExplainAndTestCLI(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record")
	cfgText := gatewayConfig(filepath.Join(dir, "tg.db"), annotatedServer(record, true)+policyV2Body)
	cfg := filepath.Join(dir, "toolgate.yaml")
	if err := os.WriteFile(cfg, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	pass := filepath.Join(dir, "pass.yaml")
	fail := filepath.Join(dir, "fail.yaml")
	write := func(path, text string) {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(pass, `
config: toolgate.yaml
cases:
  - {name: small amount, server: t, tool: big_result, args: {amount: 100}, expect: allow, monitor: would_hold}
  - {name: big amount, server: t, tool: big_result, args: {amount: 101}, expect: deny, rule: default}
  - {name: past int64, server: t, tool: big_result, args: {amount: 9223372036854775808}, expect: deny}
  - {name: git log, server: t, tool: progress, args: {command: git log -1}, expect: allow}
  - {name: chained, server: t, tool: progress, args: {command: "git status; rm -rf ~"}, expect: deny}
  - {name: slow and big, server: t, tool: slow, args: {seconds: 9}, expect: deny, rule: no big slow}
`)
	write(fail, `
config: toolgate.yaml
cases:
  - {name: small amount, server: t, tool: big_result, args: {amount: 100}, expect: allow}
  - {name: wrongly expected, server: t, tool: big_result, args: {amount: 500}, expect: allow}
`)
	// Against the file.
	out := mustToolgate(t, "", "", "policy", "explain", "--config", cfg, "--server", "t", "--tool", "big_result", "--args", `{"amount":101}`)
	for _, w := range []string{"effect:      deny, decided by the default", `[1] "small amounts" allow: no match`, "when args.amount <= 100: false"} {
		if !strings.Contains(out, w) {
			t.Errorf("explain --config lacks %q:\n%s", w, out)
		}
	}
	// Annotations are unknown in a file unless given.
	out = mustToolgate(t, "", "", "policy", "explain", "--config", cfg, "--server", "t", "--tool", "echo_raw")
	if !strings.Contains(out, "effect:      deny") {
		t.Errorf("echo_raw without --annotations:\n%s", out)
	}
	out = mustToolgate(t, "", "", "policy", "explain", "--config", cfg, "--server", "t", "--tool", "echo_raw", "--annotations", "read_only")
	if !strings.Contains(out, `effect:      allow, decided by rule "read-only tools"`) {
		t.Errorf("echo_raw with --annotations read_only:\n%s", out)
	}
	if out := mustToolgate(t, "", "", "policy", "test", pass); !strings.Contains(out, "PASS: 6 cases") {
		t.Errorf("policy test (file):\n%s", out)
	}
	r := runToolgate(t, "", "", "policy", "test", fail)
	if r.Code != 1 || !strings.Contains(r.Stdout, "--- FAIL: wrongly expected") || !strings.Contains(r.Stdout, "effect: want allow, got deny") {
		t.Errorf("policy test of a failing case (file): exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	// Against the live gateway (which also knows echo_raw's annotations).
	g := startGateway(t, cfgText, nil)
	out = mustToolgate(t, g.Admin, approverToken, "policy", "explain", "--addr", g.Admin, "--server", "t", "--tool", "echo_raw", "--principal", agentID)
	if !strings.Contains(out, `effect:      allow, decided by rule "read-only tools"`) || !strings.Contains(out, "annotations: read_only true") {
		t.Errorf("explain --addr echo_raw:\n%s", out)
	}
	// $TOOLGATE_ADDR, as for the other admin commands, when neither
	// --config nor --addr is given.
	out = mustToolgate(t, g.Admin, approverToken, "policy", "explain", "--server", "t", "--tool", "echo_raw", "--principal", agentID)
	if !strings.Contains(out, `effect:      allow, decided by rule "read-only tools"`) || !strings.Contains(out, "annotations: read_only true") {
		t.Errorf("explain with $TOOLGATE_ADDR, echo_raw:\n%s", out)
	}
	if out := mustToolgate(t, g.Admin, approverToken, "policy", "test", pass, "--addr", g.Admin); !strings.Contains(out, "PASS: 6 cases") {
		t.Errorf("policy test (live):\n%s", out)
	}
	r = runToolgate(t, g.Admin, approverToken, "policy", "test", fail, "--addr", g.Admin)
	if r.Code != 1 || !strings.Contains(r.Stdout, "FAIL: 1 of 2 cases failed") {
		t.Errorf("policy test of a failing case (live): exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	r = runToolgate(t, g.Admin, "wrong-token", "policy", "test", pass, "--addr", g.Admin)
	if r.Code != 1 || !strings.Contains(r.Stderr, "401") {
		t.Errorf("bad token: exit %d\n%s", r.Code, r.Stderr)
	}
}

// TestExampleEnforcementPolicy runs the policy test file shipped in
// examples/ (the one the README shows) as a separate process.
func TestExampleEnforcementPolicy(t *testing.T) {
	cases, err := filepath.Abs("../examples/policy-cases.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := mustToolgate(t, "", "", "policy", "test", cases, "-v")
	if !strings.Contains(out, "PASS:") || strings.Contains(out, "FAIL") {
		t.Errorf("examples/policy-cases.yaml:\n%s", out)
	}
}

// TestExampleBuildAgentPolicy keeps the recipe of docs/policy.md ("A policy
// for an agent that builds software") true: policy check finds nothing in
// examples/build-agent.yaml (an exception missing from a deny or approve
// command rule is a warning) and its test table passes, each as a separate
// process.
func TestExampleBuildAgentPolicy(t *testing.T) {
	cfg, err := filepath.Abs("../examples/build-agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cases, err := filepath.Abs("../examples/build-agent-cases.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"TOOLGATE_AGENT_TOKEN": strings.Repeat("a", 32),
		"TOOLGATE_ALICE_TOKEN": strings.Repeat("b", 32),
		"TOOLGATE_BOB_TOKEN":   strings.Repeat("c", 32),
	}
	// Checked from a copy in a directory of its own: a store beside the
	// example (the checkout's ./data/toolgate.db, which the README's quick
	// start makes) would add a warning that this file is not to blame for
	// (newuser49).
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgCopy := filepath.Join(t.TempDir(), "build-agent.yaml")
	if err := os.WriteFile(cfgCopy, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r := runToolgateEnv(t, env, "policy", "check", cfgCopy)
	if r.Code != 0 || !strings.Contains(r.Stdout, "build-agent.yaml: ok") {
		t.Errorf("policy check: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// The shell server is a placeholder the user replaces: its missing
	// binary is the one warning expected.
	for _, line := range strings.Split(strings.TrimSpace(r.Stderr), "\n") {
		if line != "" && !strings.Contains(line, `servers.shell.command "./bin/shell-mcp" does not exist`) {
			t.Errorf("policy check warns: %s", line)
		}
	}

	out := mustToolgate(t, "", "", "policy", "test", cases, "-v")
	m := regexp.MustCompile(`(?m)^PASS: (\d+) cases$`).FindStringSubmatch(out)
	if m == nil || strings.Contains(out, "FAIL") {
		t.Fatalf("examples/build-agent-cases.yaml:\n%s", out)
	}
	if n, _ := strconv.Atoi(m[1]); n < 40 {
		t.Errorf("examples/build-agent-cases.yaml has %d cases, want at least 40", n)
	}
	// Each effect is tested: the calls that run, the ones a human sees
	// and the ones that never run.
	b, err = os.ReadFile(cases)
	if err != nil {
		t.Fatal(err)
	}
	for _, effect := range []string{"expect: allow", "expect: approve", "expect: deny"} {
		if c := strings.Count(string(b), effect); c < 10 {
			t.Errorf("examples/build-agent-cases.yaml: %d cases %q, want at least 10", c, effect)
		}
	}
}
