package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const testConfig = `
servers:
  pay: {url: "http://127.0.0.1:9000/mcp"}
  sh: {command: shell-server}
  fs: {command: fs-server, trust_annotations: true}
agents:
  - {id: desktop, token_env: DESKTOP_TOKEN, groups: [finance]}
approvers:
  - {id: alice, token_env: ALICE_TOKEN, roles: [approver], groups: [finance]}
storage: {driver: postgres, dsn: "${DATABASE_URL}"}
policy:
  default: approve
  rules:
    - name: small transfers
      server: pay
      tools: [transfer]
      when: args.amount <= 100
      effect: allow
    - name: getters
      server: fs
      tools: ["get_*"]
      effect: allow
    - name: reads
      server: fs
      annotations: {read_only: true}
      effect: allow
    - name: git reads
      server: sh
      tools: [run]
      command: {argument: command, match: ["git status", "git log *"]}
      effect: allow
    - name: finance only
      server: pay
      tools: [refund]
      principals: [group:finance]
      effect: approve
      approval: {approvals: 2}
    - name: trial
      server: pay
      tools: [refund]
      effect: deny
      monitor: true
`

// writeFiles writes the named files into a fresh directory.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func runTest(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := RunPolicyTest(t.Context(), args, &out, &errb, func(string) (string, bool) { return "", false })
	return code, out.String(), errb.String()
}

// TestPolicyTestPasses runs a table that matches the policy: exit 0.
func TestPolicyTestPasses(t *testing.T) {
	dir := writeFiles(t, map[string]string{"toolgate.yaml": testConfig, "cases.yaml": `
config: toolgate.yaml
cases:
  - {name: small transfer, server: pay, tool: transfer, args: {amount: 100}, expect: allow, rule: small transfers}
  - {name: big transfer, server: pay, tool: transfer, args: {amount: 101}, expect: approve, rule: default}
  - {name: huge integer, server: pay, tool: transfer, args: {amount: 9223372036854775808}, expect: approve}
  - {name: JSON args, server: pay, tool: transfer, args: '{"amount": 5}', expect: allow}
  - {name: git log, server: sh, tool: run, args: {command: git log -1}, expect: allow}
  - {name: chained, server: sh, tool: run, args: {command: "git status; rm -rf ~"}, expect: approve}
  - {name: read-only tool, server: fs, tool: stat, annotations: [read_only], expect: allow}
  - {name: unknown hints, server: fs, tool: stat, expect: approve}
  - {name: refund by finance, server: pay, tool: refund, principal: desktop, expect: approve, monitor: would_deny}
  - {name: refund by someone else, server: pay, tool: refund, expect: approve, monitor: would_deny}
  - {name: no monitor verdict, server: pay, tool: transfer, args: {amount: 1}, expect: allow, monitor: none}
`})
	code, out, errOut := runTest(t, filepath.Join(dir, "cases.yaml"), "-v")
	if code != ExitOK || !strings.Contains(out, "PASS: 11 cases") || strings.Contains(out, "FAIL") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "--- PASS: small transfer (") {
		t.Errorf("-v does not list passing cases:\n%s", out)
	}
	if !strings.Contains(errOut, "DATABASE_URL") || !strings.Contains(errOut, "outside its policy") {
		t.Errorf("stderr does not note the unset variable and the invalid storage section:\n%s", errOut)
	}
}

// TestPolicyTestFails runs a table with wrong expectations: exit 1, each
// failure printed like a test runner with what was wanted and what
// decided, and the near miss.
func TestPolicyTestFails(t *testing.T) {
	dir := writeFiles(t, map[string]string{"toolgate.yaml": testConfig, "cases.yaml": `
cases:
  - name: get-env is a getter
    server: fs
    tool: get-env
    expect: allow
  - {name: fine, server: pay, tool: transfer, args: {amount: 1}, expect: allow}
  - {name: wrong rule, server: pay, tool: transfer, args: {amount: 1}, expect: allow, rule: getters}
  - {name: wrong monitor, server: pay, tool: refund, expect: approve, monitor: none}
`})
	code, out, errOut := runTest(t, filepath.Join(dir, "cases.yaml"), "--config", filepath.Join(dir, "toolgate.yaml"))
	if code != ExitFailure {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"--- FAIL: get-env is a getter (" + filepath.Join(dir, "cases.yaml") + ":3)",
		"effect: want allow, got approve",
		"decided by the default; matched: none",
		`near miss, rule "getters": tool pattern "get_*" would match "get-env"`,
		`--- FAIL: wrong rule`, `rule: want "getters", got "small transfers"`,
		`--- FAIL: wrong monitor`, `monitor: want none, got would_deny by "trial"`,
		"FAIL: 3 of 4 cases failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "--- FAIL: fine") {
		t.Errorf("a passing case is reported as failing:\n%s", out)
	}
}

// TestPolicyTestUsage checks the exit status 2 cases.
func TestPolicyTestUsage(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"toolgate.yaml":  testConfig,
		"bad.yaml":       "cases:\n  - {name: x, server: pay, expect: maybe, bogus: 1}\n",
		"noconfig.yaml":  "cases:\n  - {name: x, server: pay, tool: t, expect: allow}\n",
		"badpolicy.yaml": "policy:\n  rules:\n    - {name: t, when: 'tool > 5', effect: allow}\n",
		"cases2.yaml":    "config: badpolicy.yaml\ncases:\n  - {name: x, server: pay, tool: t, expect: allow}\n",
		"badargs.yaml":   "config: toolgate.yaml\ncases:\n  - {name: x, server: pay, tool: t, expect: allow, args: {n: .inf}}\n",
	})
	for _, args := range [][]string{
		{},
		{filepath.Join(dir, "bad.yaml")},
		{filepath.Join(dir, "noconfig.yaml")},
		{filepath.Join(dir, "cases2.yaml")},
		{filepath.Join(dir, "badargs.yaml")},
		{filepath.Join(dir, "noconfig.yaml"), "--config", "a", "--addr", "b"},
		{filepath.Join(dir, "missing.yaml")},
	} {
		if code, out, errOut := runTest(t, args...); code != ExitUsage {
			t.Errorf("%v: exit %d, want 2\n%s%s", args, code, out, errOut)
		}
	}
}

// TestArgsJSON checks the YAML to JSON conversion of case arguments:
// numbers keep their spelling, strings stay strings.
func TestArgsJSON(t *testing.T) {
	cases := []struct{ yaml, want string }{
		{`{a: 1, b: 18446744073709551616, c: 1.5e3, d: "x", e: true, f: null, g: [1, "2"], h: {i: -0}}`,
			`{"a":1,"b":18446744073709551616,"c":1.5e3,"d":"x","e":true,"f":null,"g":[1,"2"],"h":{"i":-0}}`},
		{`{n: 0x10}`, `{"n":16}`},
		{`{s: "0x10", t: '123'}`, `{"s":"0x10","t":"123"}`},
		{`'{"raw": 1e400}'`, `{"raw": 1e400}`},
	}
	for _, c := range cases {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(c.yaml), &n); err != nil {
			t.Fatal(err)
		}
		got, err := argsJSON(n.Content[0])
		if err != nil || string(got) != c.want || !json.Valid(got) {
			t.Errorf("%s: %s, %v; want %s", c.yaml, got, err, c.want)
		}
	}
	for _, bad := range []string{`{n: .inf}`, `{n: .nan}`, `[1]`, `{a: 1, a: 2}`, `'not json'`} {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(bad), &n); err != nil {
			continue // yaml itself refuses repeated keys
		}
		if got, err := argsJSON(n.Content[0]); err == nil {
			t.Errorf("%s: %s, want an error", bad, got)
		}
	}
}

// TestExplainNamesTheTimeoutRule (fixes20): with two matching approve
// rules, the call is decided by the first, but the hold timeout is the
// shortest of the two; explain said only "decided by" the first, so an
// operator read the first rule's timeout as the one that applies. It now
// names the rule the timeout comes from when that is another rule.
func TestExplainNamesTheTimeoutRule(t *testing.T) {
	cfg := strings.Replace(testConfig, `    - name: trial
`, `    - name: quick refunds
      server: pay
      tools: [refund]
      effect: approve
      approval: {timeout: 1m}
    - name: trial
`, 1)
	out := explainRefund(t, cfg)
	for _, want := range []string{
		`effect:      approve, decided by rule "finance only"`,
		`approval:    2 approval(s) from anyone with the approver role, timeout 1m0s (from rule "quick refunds"), valid_for 10m0s, mode hold`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// explainRefund runs policy explain on the config cfg for desktop's
// pay refund and returns what it printed.
func explainRefund(t *testing.T, cfg string) string {
	t.Helper()
	dir := writeFiles(t, map[string]string{"toolgate.yaml": cfg})
	var out, errb bytes.Buffer
	code := RunExplain(t.Context(), []string{"--config", filepath.Join(dir, "toolgate.yaml"), "--server", "pay", "--tool", "refund", "--principal", "desktop"},
		&out, &errb, func(string) (string, bool) { return "", false })
	if code != ExitOK {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
	return out.String()
}

// TestExplainText checks the text of policy explain against a file.
func TestExplainText(t *testing.T) {
	text := explainRefund(t, testConfig)
	for _, want := range []string{
		"call:        server pay, tool refund, principal desktop (groups finance)",
		`effect:      approve, decided by rule "finance only"`,
		`monitor:     would_deny by "trial"`,
		"approval:    2 approval(s) from anyone with the approver role, timeout 5m0s, valid_for 10m0s, mode hold",
		`[4] "finance only" approve: MATCH, decides`,
		"principals: desktop is selected",
		`[5] "trial" deny (monitor mode): MATCH`,
		`[0] "small transfers" allow: no match`,
		"default: approve",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	// --json is the explanation itself.
	dir := writeFiles(t, map[string]string{"toolgate.yaml": testConfig})
	var out, errb bytes.Buffer
	code := RunExplain(t.Context(), []string{"--json", "--config", filepath.Join(dir, "toolgate.yaml"), "--server", "pay", "--tool", "transfer", "--args", `{"amount":7}`},
		&out, &errb, nil)
	var x struct {
		Effect string `json:"effect"`
		Rule   string `json:"rule"`
	}
	if code != ExitOK || json.Unmarshal(out.Bytes(), &x) != nil || x.Effect != "allow" || x.Rule != "small transfers" {
		t.Errorf("--json: exit %d %s", code, out.String())
	}
	for _, args := range [][]string{
		{"--server", "pay", "--tool", "t"},
		{"--config", "x", "--addr", "y", "--server", "pay", "--tool", "t"},
		{"--config", "x", "--tool", "t"},
		{"--config", filepath.Join(dir, "toolgate.yaml"), "--server", "pay", "--tool", "t", "--args", "{"},
		{"--config", filepath.Join(dir, "toolgate.yaml"), "--server", "pay", "--tool", "t", "--annotations", "readonly"},
	} {
		if code := RunExplain(t.Context(), args, &out, &errb, nil); code != ExitUsage {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
