package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigProblemsNameTheirLine runs the built binary: `policy check` and
// `serve` refuse a rule's explicit `approvals: 0` (which would silently
// mean one approver) and a when condition that does not compile, each as
// FILE:LINE: naming the rule and the key, with exit status 2; and
// `policy check --tools` warns (exit 0) about a condition reading an
// argument the tool's input schema does not declare.
func TestConfigProblemsNameTheirLine(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	head := `listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }
storage: { path: ` + filepath.Join(dir, "toolgate.db") + ` }
servers:
  pay: { url: "http://127.0.0.1:9/mcp" }
agents:
  - { id: agent-1, token_env: E2E_AGENT_TOKEN }
approvers:
  - { id: alice, token_env: E2E_APPROVER_TOKEN, roles: [admin] }
policy:
  default: allow
  rules:
    - name: big
      server: pay
      tools: [transfer]
`
	env := map[string]string{"E2E_AGENT_TOKEN": "agent-token-5f1e9c0a7d3b42e8", "E2E_APPROVER_TOKEN": "approver-token-8c2d4e6f0a1b3c5d"}
	bad := write("bad.yaml", head+`      when: args.amount >
      effect: approve
      approval: { approvals: 0 }
`)
	wantZero := bad + `:17: policy.rules[0] "big": approval.approvals: 0 is not allowed: a zero would silently inherit the policy's value; omit it to inherit policy.approval.approvals`
	wantWhen := bad + `:15: policy.rules[0] "big": when: `
	res := runToolgateEnv(t, env, "policy", "check", bad)
	if res.Code != 2 || !strings.Contains(res.Stderr, wantZero) || !strings.Contains(res.Stderr, wantWhen) || !strings.Contains(res.Stderr, "2 problem(s)") {
		t.Errorf("policy check exited %d, want 2 naming\n%s\n%s\nstderr:\n%s", res.Code, wantZero, wantWhen, res.Stderr)
	}
	res = runToolgateEnv(t, env, "serve", "--config", bad)
	if res.Code != 2 || !strings.Contains(res.Stderr, wantZero) || !strings.Contains(res.Stderr, wantWhen) {
		t.Errorf("serve exited %d, want 2 naming\n%s\n%s\nstderr:\n%s", res.Code, wantZero, wantWhen, res.Stderr)
	}

	typo := write("typo.yaml", head+`      when: args.ammount > 1000
      effect: approve
`)
	tools := write("tools.json", `{"tools":[{"name":"transfer","inputSchema":{"type":"object","properties":{"amount":{"type":"number"},"to":{"type":"string"}}}}]}`)
	res = runToolgateEnv(t, env, "policy", "check", typo, "--tools", "pay="+tools)
	want := `warning: ` + typo + `:15: policy.rules[0] "big": when reads args.ammount, but the input schema of pay/transfer does not declare it (it declares: amount, to)`
	if res.Code != 0 || !strings.Contains(res.Stderr, want) || !strings.Contains(res.Stdout, typo+": ok") {
		t.Errorf("policy check --tools exited %d, want 0 and\n%s\nstdout: %s\nstderr:\n%s", res.Code, want, res.Stdout, res.Stderr)
	}
}
