package config

import (
	"encoding/json"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"toolgate/internal/policy"
)

// issue12YAML uses every policy key of issue 12.
const issue12YAML = `
servers:
  pay: {url: "http://127.0.0.1:9000/mcp"}
  fs: {command: fs-server, trust_annotations: true}
  sh: {command: sh-server}
agents:
  - {id: desktop, token_env: T, groups: [ops], tenant: acme, on_behalf_of: alice}
policy:
  default: approve
  enforce: true
  list_denied: false
  rules:
    - name: small transfers
      server: pay
      tools: [transfer]
      when: args.amount <= 100
      effect: allow
    - name: git reads
      server: sh
      tools: [run]
      command: {argument: command, match: ["git status", "git log *"]}
      effect: allow
    - name: fs reads
      server: fs
      annotations: {read_only: true}
      effect: allow
    - name: ops only
      server: pay
      principals: [group:ops, desktop]
      effect: deny
      monitor: true
`

// TestIssue12Keys checks that the policy keys of issue 12 and
// servers.<name>.trust_annotations load, and that the loaded policy
// decides with them.
func TestIssue12Keys(t *testing.T) {
	cfg := mustLoad(t, issue12YAML, nil)
	if !cfg.TrustsAnnotations("fs") || cfg.TrustsAnnotations("sh") || cfg.TrustsAnnotations("nope") {
		t.Errorf("trust_annotations: fs %v sh %v", cfg.TrustsAnnotations("fs"), cfg.TrustsAnnotations("sh"))
	}
	r := cfg.Policy.Rules
	if r[0].When != "args.amount <= 100" || r[1].Command == nil || len(r[1].Command.Match) != 2 || r[2].Annotations == nil ||
		*r[2].Annotations.ReadOnly != true || len(r[3].Principals) != 2 || r[3].Monitor == nil || !*r[3].Monitor {
		t.Fatalf("rules %+v", r)
	}
	e, err := policy.Compile(&cfg.Policy)
	if err != nil {
		t.Fatal(err)
	}
	ro := policy.AnnotationsFromHints(ptrBool(true), nil, nil, nil)
	cases := []struct {
		call policy.Call
		want policy.Effect
	}{
		{cfg.PolicyCall("pay", "transfer", json.RawMessage(`{"amount":100}`), "desktop", nil), policy.Allow},
		{cfg.PolicyCall("pay", "transfer", json.RawMessage(`{"amount":101}`), "desktop", nil), policy.Approve},
		{cfg.PolicyCall("sh", "run", json.RawMessage(`{"command":"git log -1"}`), "", nil), policy.Allow},
		{cfg.PolicyCall("fs", "read", nil, "", &ro), policy.Allow},
		// sh is not trusted: given annotations are dropped.
		{cfg.PolicyCall("sh", "other", nil, "", &ro), policy.Approve},
	}
	for i, c := range cases {
		d, _ := e.Evaluate(c.call)
		if d.Effect != c.want {
			t.Errorf("case %d: effect %s by %q, want %s", i, d.Effect, d.Rule, c.want)
		}
	}
	if p, ok := cfg.PolicyPrincipal("desktop"); !ok || p.Tenant != "acme" || p.OnBehalfOf != "alice" || p.Groups[0] != "ops" {
		t.Errorf("PolicyPrincipal = %+v, %v", p, ok)
	}
	// The monitored rule and the annotations of an untrusted server are
	// warned about.
	warns := strings.Join(cfg.Warnings(), "\n")
	if !strings.Contains(warns, `policy in monitor mode: rule "ops only" has monitor: true`) {
		t.Errorf("no monitor-mode warning in:\n%s", warns)
	}
	// Round trip: the keys marshal back to what loads again.
	b, err := yaml.Marshal(cfg.Policy)
	if err != nil {
		t.Fatal(err)
	}
	var back policy.Policy
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&back); err != nil {
		t.Fatalf("policy YAML does not load back: %v\n%s", err, b)
	}
	if policy.Revision(&back) != policy.Revision(&cfg.Policy) {
		t.Errorf("revision changed through YAML:\n%s", b)
	}
}

func ptrBool(v bool) *bool { return &v }

// TestIssue12LoadErrors checks that a condition's type error, a bad
// command selector and an unknown key in a selector are reported at load,
// naming the rule, together with any other problem.
func TestIssue12LoadErrors(t *testing.T) {
	text := `
servers:
  sh: {command: sh-server}
policy:
  rules:
    - name: typed
      when: tool > 5
      effect: allow
    - name: cmd
      command: {argument: "", match: []}
      effect: deny
    - name: allow monitor
      effect: allow
      monitor: true
`
	_, err := load(t, text, nil)
	if err == nil {
		t.Fatal("Load accepted a policy with a type error")
	}
	for _, want := range []string{`policy.rules[0] "typed": when: `, "no matching overload", `policy.rules[1] "cmd": command.argument: required`,
		`policy.rules[1] "cmd": command.match: at least one pattern`, `policy.rules[2] "allow monitor": monitor: only deny and approve`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	_, err = load(t, "policy:\n  rules:\n    - {effect: allow, annotations: {readonly: true}}\n", nil)
	if err == nil || !strings.Contains(err.Error(), `unknown key "readonly"`) {
		t.Errorf("unknown annotation key: %v", err)
	}
	_, err = load(t, "servers:\n  fs: {command: x, trust_annotation: true}\n", nil)
	if err == nil || !strings.Contains(err.Error(), `unknown key "trust_annotation"`) {
		t.Errorf("misspelt trust_annotations: %v", err)
	}
}

// TestUntrustedAnnotationsWarning checks the warning for a rule selecting
// annotations of a named server that is not trusted.
func TestUntrustedAnnotationsWarning(t *testing.T) {
	cfg := mustLoad(t, `
servers:
  sh: {command: sh-server}
policy:
  enforce: false
  rules:
    - {name: ro, server: sh, annotations: {read_only: true}, effect: allow}
`, nil)
	warns := strings.Join(cfg.Warnings(), "\n")
	for _, want := range []string{`policy.rules[0] "ro": selects annotations of server "sh", which is not marked trust_annotations`, "policy.enforce is false"} {
		if !strings.Contains(warns, want) {
			t.Errorf("warnings lack %q:\n%s", want, warns)
		}
	}
}
