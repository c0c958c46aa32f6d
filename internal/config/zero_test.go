package config

import (
	"errors"
	"strings"
	"testing"

	"toolgate/internal/policy"
)

// zeroBase is a valid config whose policy has one approve rule "w"; the
// tests append to the rule's line 9 (its approval block) or replace parts.
const zeroBase = `listen: { mcp: 127.0.0.1:0 }
servers:
  pay: { url: "http://127.0.0.1:9/mcp" }
policy:
  default: allow
  approval: { timeout: 5m, mode: hold, approvals: 2, valid_for: 10m }
  rules:
    - name: w
      server: pay
      tools: [transfer]
      effect: approve
`

// TestExplicitZeroIsRefused: an explicit zero in a rule's approval block
// (which would silently inherit the policy's value) and a zero or negative
// value in the policy's own approval are refused, with the line of the key,
// the rule, the field and what to write instead; omitting the key inherits.
func TestExplicitZeroIsRefused(t *testing.T) {
	tests := []struct {
		name, approval string
		want           string // "" for no error
	}{
		{"omitted inherits", "{ mode: retry }", ""},
		{"positive override", "{ approvals: 1, timeout: 1m, valid_for: 1s }", ""},
		{"approvals 0", "\n        approvals: 0", `line 13: policy.rules[0] "w": approval.approvals: 0 is not allowed: a zero would silently inherit the policy's value; omit it to inherit policy.approval.approvals`},
		{"approvals 0 says allow", "{ approvals: 0 }", "use effect: allow"},
		{"timeout 0s", "\n        timeout: 0s", `line 13: policy.rules[0] "w": approval.timeout: 0s is not allowed`},
		{"timeout bare 0", "{ timeout: 0 }", `line 12: policy.rules[0] "w": approval.timeout: 0 is not allowed`},
		{"valid_for 0s", "{ valid_for: 0s }", `line 12: policy.rules[0] "w": approval.valid_for: 0s is not allowed`},
		{"timeout negative", "\n        mode: hold\n        timeout: -1s", `line 14: policy.rules[0] "w": approval.timeout -1s: must be > 0 (or omitted to inherit)`},
		{"approvals negative", "{ approvals: -1 }", `line 12: policy.rules[0] "w": approval.approvals -1: must be >= 1`},
		{"approvers empty", "{ approvers: [] }", `line 12: policy.rules[0] "w": approval.approvers: an empty list is not allowed: it would silently inherit policy.approval.approvers`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := load(t, zeroBase+"      approval: "+tt.approval+"\n", nil)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				if got := cfg.Policy.Rules[0].Approval; got == nil {
					t.Fatal("no approval override")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load error:\n%v\nwant it to contain\n%s", err, tt.want)
			}
			var fe *policy.FieldError
			if !errors.As(err, &fe) || fe.Rule != 0 || !strings.HasPrefix(fe.Key, "approval.") {
				t.Errorf("error %v: FieldError %+v, want rule 0 and an approval key", err, fe)
			}
		})
	}
}

// TestTopLevelApprovalZero: the policy's own approval parameters have no
// value to inherit, so a zero is refused (with its line) as before.
func TestTopLevelApprovalZero(t *testing.T) {
	for key, want := range map[string]string{
		"approvals: 0":  `line 6: policy.approval.approvals 0: must be >= 1 (for calls that need no approval, use effect: allow)`,
		"timeout: 0s":   `line 6: policy.approval.timeout 0s: must be > 0`,
		"valid_for: 0s": `line 6: policy.approval.valid_for 0s: must be > 0`,
	} {
		text := strings.Replace(zeroBase, "approval: { timeout: 5m, mode: hold, approvals: 2, valid_for: 10m }",
			"approval: { mode: hold, "+key+" }", 1)
		_, err := load(t, text, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Load error %v, want %q", key, err, want)
		}
	}
}

// TestProblemsNameTheirLine: validation problems (a CEL condition that does
// not compile, a negative timeout of a server, a bad glob) name the line of
// the key they are about, in Load's error and, as path:line:, in Check's.
func TestProblemsNameTheirLine(t *testing.T) {
	text := `listen: { mcp: 127.0.0.1:0 }
servers:
  pay:
    url: "http://127.0.0.1:9/mcp"
    call_timeout: -1s
policy:
  default: allow
  rules:
    - name: big
      server: pay
      when: |
        args.amount > 1 &&
          principal.grups == []
      effect: deny
    - tools: ["[bad"]
      effect: deny
    - name: eof
      when: |
        args.amount >
      effect: deny
`
	_, err := load(t, text, nil)
	for _, want := range []string{
		`line 5: servers.pay.call_timeout -1s: must be >= 0`,
		`line 13: policy.rules[0] "big": when: <input>:2:`, // the expression's line 2
		`line 15: policy.rules[1]: tools[0]: `,
		`line 19: policy.rules[2] "eof": when: <input>:2:1: Syntax error`, // at the end: its last line`
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load error:\n%v\nwant it to contain %q", err, want)
		}
	}
	path := t.TempDir() + "/c.yaml"
	if err := writeFile(path, text); err != nil {
		t.Fatal(err)
	}
	_, problems, _ := Check(path, nil)
	got := strings.Join(problems, "\n")
	for _, want := range []string{path + `:5: servers.pay.call_timeout`, path + `:13: policy.rules[0] "big": when: `, path + `:15: policy.rules[1]: tools[0]`} {
		if !strings.Contains(got, want) {
			t.Errorf("Check problems:\n%s\nwant a line starting %q", got, want)
		}
	}
	_, err = LoadFile(path, nil)
	if err == nil || !strings.Contains(err.Error(), "\n"+path+`:13: policy.rules[0] "big": when: `) {
		t.Errorf("LoadFile error:\n%v\nwant the when problem at %s:13:", err, path)
	}
}

// TestConfigExplicitZero: connect_timeout and a channel's max_age, where a
// zero would silently mean the default, refuse an explicit 0 with its line;
// call_timeout: 0 (no limit) and retention 0 (keep forever) stay valid.
func TestConfigExplicitZero(t *testing.T) {
	base := "listen: { mcp: 127.0.0.1:0 }\nservers:\n  pay:\n    url: \"http://127.0.0.1:9/mcp\"\n"
	tests := []struct{ name, extra, want string }{
		{"connect_timeout 0s", "    connect_timeout: 0s\n", "line 5: servers.pay.connect_timeout: 0s is not allowed"},
		{"connect_timeout 0", "    connect_timeout: 0\n", "line 5: servers.pay.connect_timeout: 0 is not allowed"},
		{"max_age 0s", "notify:\n  channels:\n    - { name: ops, type: webhook, url_env: HOOK, max_age: 0s }\n",
			"line 7: notify.channels[0].max_age: 0s is not allowed"},
		{"call_timeout 0", "    call_timeout: 0\nretention: { requests: 0, events: 0s }\n", ""},
		{"connect_timeout set", "    connect_timeout: 2m\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, base+tt.extra, map[string]string{"HOOK": "http://127.0.0.1:9/hook"})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load error:\n%v\nwant it to contain %q", err, tt.want)
			}
		})
	}
}
