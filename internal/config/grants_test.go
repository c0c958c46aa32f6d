package config

import (
	"strings"
	"testing"
	"time"
)

func TestGrantsSection(t *testing.T) {
	if got := Default().Grants.MaxTTL; got != 24*time.Hour {
		t.Errorf("default grants.max_ttl = %s, want 24h", got)
	}
	if cfg := mustLoad(t, "grants: { max_ttl: 90m }\n", nil); cfg.Grants.MaxTTL != 90*time.Minute {
		t.Errorf("grants.max_ttl = %s, want 1h30m", cfg.Grants.MaxTTL)
	}
	for text, want := range map[string]string{
		"grants: { max_ttl: 0s }\n":  "grants.max_ttl 0s: must be positive",
		"grants: { max_ttl: -1h }\n": "grants.max_ttl -1h0m0s: must be positive",
		"grants: { ttl: 1h }\n":      `unknown key "ttl" in grants`,
	} {
		if _, err := load(t, text, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", text, err, want)
		}
	}
}

// TestGrantsCanBeTurnedOff (branch grants50): grants.enabled defaults to
// true and takes false; a rule's approval.grants: false loads and makes
// the decision forbid grants; a value that is not a boolean is a config
// error in either place (fail closed).
func TestGrantsCanBeTurnedOff(t *testing.T) {
	if !Default().Grants.Enabled {
		t.Error("default grants.enabled = false, want true")
	}
	if cfg := mustLoad(t, "grants: { enabled: false }\n", nil); cfg.Grants.Enabled {
		t.Error("grants.enabled: false loaded as true")
	}
	cfg := mustLoad(t, `
servers:
  pay: {url: "http://127.0.0.1:9000/mcp"}
policy:
  default: deny
  rules:
    - name: refunds
      server: pay
      tools: [refund]
      effect: approve
      approval: { approvals: 2, grants: false }
`, nil)
	a := cfg.Policy.Rules[0].Approval
	if a == nil || a.Grants == nil || *a.Grants || a.GrantsAllowed() {
		t.Fatalf("rule approval = %+v, want grants false", a)
	}
	d, err := cfg.Policy.Evaluate(cfg.PolicyCall("pay", "refund", []byte(`{"amount":50000}`), "", nil))
	if err != nil || d.Approval.GrantsAllowed() {
		t.Errorf("decision = %+v (%v), want grants forbidden", d.Approval, err)
	}
	for _, text := range []string{
		"grants: { enabled: maybe }\n",
		"servers: { pay: { url: \"http://127.0.0.1:9000/mcp\" } }\npolicy: { default: approve, rules: [ { server: pay, effect: approve, approval: { grants: maybe } } ] }\n",
		"policy: { default: approve, approval: { grants: 0 } }\n",
	} {
		if _, err := load(t, text, nil); err == nil || !strings.Contains(err.Error(), "grants") || !strings.Contains(err.Error(), "is not true or false") {
			t.Errorf("%q: %v, want a config error naming the key", text, err)
		}
	}
}
