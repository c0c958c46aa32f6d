package config

import (
	"os"
	"strings"
	"testing"
)

// TestNotificationsDocExample: the first configuration of
// docs/notifications.md, with a store, a server and an agent around it,
// loads without a warning that nobody can review its rule. As written
// before, its rule wanted two approvals from group:ops while its only
// approver was in no group, so `policy check` and `serve` refused it.
func TestNotificationsDocExample(t *testing.T) {
	b, err := os.ReadFile("../../docs/notifications.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```yaml\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/notifications.md has no yaml block")
	}
	cfg := "storage: { driver: sqlite, path: ./data/t.db }\nservers:\n  pay: { command: /bin/true }\nagents:\n  - { id: bot, token_env: AGENT_TOK }\n" + block
	env := MapEnv(map[string]string{
		"AGENT_TOK": "agent-token-0123456789", "TOOLGATE_ALICE_TOKEN": "alice-token-0123456789", "TOOLGATE_BOB_TOKEN": "bob-token-0123456789",
		"OPS_HOOK_URL": "https://hooks.example.com/x", "OPS_HOOK_SECRET": "hook-secret-0123456789",
		"SLACK_BOT_TOKEN": "xoxb-0123456789", "SLACK_SIGNING_SECRET": "slack-secret-0123456789",
	})
	c, err := Load(strings.NewReader(cfg), env)
	if err != nil {
		t.Fatalf("the documented config does not load: %v", err)
	}
	for _, w := range c.Warnings() {
		if strings.Contains(w, "review") || strings.Contains(w, "matches no configured approver") {
			t.Errorf("the documented config: %s", w)
		}
	}
}

// TestPolicyExampleQuorum: every approval of examples/policy.yaml can be
// reached by the approvers who may review it. Before, desktop acted for
// alice and "big transfers need two" wanted two of alice and bob, so
// desktop's big transfers could only expire.
func TestPolicyExampleQuorum(t *testing.T) {
	env := MapEnv(map[string]string{
		"TOOLGATE_AGENT_TOKEN": "agent-token-0123456789", "TOOLGATE_BILLING_TOKEN": "billing-token-0123456789",
		"TOOLGATE_ALICE_TOKEN": "alice-token-0123456789", "TOOLGATE_BOB_TOKEN": "bob-token-0123456789",
		"TOOLGATE_CAROL_TOKEN": "carol-token-0123456789",
	})
	c, err := LoadFile("../../examples/policy.yaml", env)
	if err != nil {
		t.Fatalf("examples/policy.yaml does not load: %v", err)
	}
	for _, w := range c.Warnings() {
		if strings.Contains(w, "review") || strings.Contains(w, "eligible") {
			t.Errorf("examples/policy.yaml: %s", w)
		}
	}
}
