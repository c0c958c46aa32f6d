package config

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"toolgate/internal/policy"
)

func load(t *testing.T, text string, env map[string]string) (Config, error) {
	t.Helper()
	return Load(strings.NewReader(text), MapEnv(env))
}

func mustLoad(t *testing.T, text string, env map[string]string) Config {
	t.Helper()
	cfg, err := load(t, text, env)
	if err != nil {
		t.Fatalf("Load:\n%v", err)
	}
	return cfg
}

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
}

func TestEmptyFilesAreDefaults(t *testing.T) {
	for _, text := range []string{"", "\n", "# only a comment\n", "---\n"} {
		if diff := cmp.Diff(Default(), mustLoad(t, text, nil)); diff != "" {
			t.Errorf("Load(%q) (-want +got):\n%s", text, diff)
		}
	}
}

// TestDefaultRoundTrip marshals Default to YAML and loads it back: every
// key it writes is known, and every value survives (durations included).
func TestDefaultRoundTrip(t *testing.T) {
	want := Default()
	want.Servers = map[string]Server{
		"fs":  {Command: "npx", Args: []string{"-y", "x"}, Env: map[string]string{"K": "V"}, Dir: "/tmp", CallTimeout: 90 * time.Second},
		"pay": {URL: "http://127.0.0.1:9000/mcp", Headers: map[string]string{"Authorization": "Bearer x"}},
	}
	want.Agents = []Agent{{ID: "desktop", Token: Token{TokenEnv: "T"}, OnBehalfOf: "alice", Tenant: "t1", Groups: []string{"bots"}}}
	want.Approvers = []Approver{{ID: "alice", Token: Token{TokenFile: "/run/alice"}, Roles: []string{"approver"}, Groups: []string{"ops"}, Tenant: "t1"}}
	want.Approvals.Redact = Redact{Keys: []string{"password"}, Patterns: []string{"^sk-"}}
	want.Approvals.AllowNoApprovers = true
	want.Stdio.Agent = "desktop"
	want.Policy.Rules = []policy.Rule{
		{Name: "r", Server: "pay", Tools: []string{"*"}, Effect: policy.Approve,
			Approval: &policy.Approval{Approvals: 2, Approvers: []string{"group:ops"}, Timeout: 10 * time.Minute, Mode: "retry", ValidFor: time.Minute}},
	}
	text, err := yaml.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(text, []byte("keepalive: 15s")) {
		t.Errorf("durations are not written as Go duration strings:\n%s", text)
	}
	got := mustLoad(t, string(text), nil)
	want.Listen.AdminSet = true // the marshalled file sets listen.admin
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s\n%s", diff, text)
	}
}

func TestDurations(t *testing.T) {
	cfg := mustLoad(t, `
approvals: { keepalive: 1m30s, retry_wait: 0s, sweep_interval: 250ms }
policy:
  approval: { timeout: 2h, valid_for: 45s }
servers:
  fs: { command: x, call_timeout: 1.5s }
`, nil)
	got := []time.Duration{cfg.Approvals.KeepAlive, cfg.Approvals.RetryWait, cfg.Approvals.SweepInterval,
		cfg.Policy.Approval.Timeout, cfg.Policy.Approval.ValidFor, cfg.Servers["fs"].CallTimeout}
	want := []time.Duration{90 * time.Second, 0, 250 * time.Millisecond, 2 * time.Hour, 45 * time.Second, 1500 * time.Millisecond}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("durations (-want +got):\n%s", diff)
	}
	// A bare number is not a duration (is 300 seconds or nanoseconds?).
	if _, err := load(t, "approvals: { keepalive: 300 }\n", nil); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("keepalive: 300 → %v, want an error on line 1", err)
	}
}

func TestPartialSectionsKeepDefaults(t *testing.T) {
	cfg := mustLoad(t, `
listen: { mcp: "127.0.0.1:0" }
approvals:
policy:
  approval: { timeout: 1m }
  rules: []
`, nil)
	want := Default()
	want.Listen.MCP = "127.0.0.1:0"
	want.Policy.Approval.Timeout = time.Minute
	want.Policy.Rules = []policy.Rule{}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// An explicitly empty admin address turns the listener off.
	if cfg := mustLoad(t, "listen: { admin: \"\" }\n", nil); cfg.Listen.Admin != "" || cfg.Listen.MCP != "127.0.0.1:7070" {
		t.Errorf("listen = %+v, want admin off and mcp default", cfg.Listen)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name string
		text string
		want []string
	}{
		{"syntax error", "listen:\n  mcp: [\n", []string{"line "}},
		{"tab indentation", "listen:\n\tmcp: x\n", []string{"line 2"}},
		{"not a mapping", "- a\n- b\n", []string{"line 1", "mapping"}},
		{"two documents", "listen: {}\n---\nstorage: {}\n", []string{"line 2", "one YAML document"}},
		{"duplicate key", "storage: { driver: sqlite }\nstorage: { path: x }\n", []string{"line 2", `"storage" already defined at line 1`}},
		{"type error", "storage:\n  max_conns: many\n", []string{"line 2", "many"}},
		{"type errors are all reported", "storage:\n  max_conns: many\napprovals:\n  max_pending: lots\n", []string{"line 2", "line 4"}},
		{"list where a map is expected", "servers: [a, b]\n", []string{"line 1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := load(t, c.text, nil)
			if err == nil {
				t.Fatalf("Load = %+v, want an error", cfg)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if diff := cmp.Diff(Config{}, cfg); diff != "" {
				t.Errorf("Load returned a config with a parse error")
			}
		})
	}
}

func TestQuickstart(t *testing.T) {
	cfg, err := LoadFile("../../examples/quickstart.yaml", MapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if w := cfg.Warnings(); len(w) != 1 || !strings.Contains(w[0], "no approver") {
		t.Errorf("Warnings = %q, want only the no-approver warning (tokens come from --dev)", w)
	}
	fs := cfg.Servers["fs"]
	if fs.Command != "npx" || !strings.HasPrefix(fs.Args[1], "@modelcontextprotocol/server-filesystem@2") || fs.Args[2] != "examples/sandbox" {
		t.Errorf("servers.fs = %+v", fs)
	}
	if cfg.Storage.Path != "./data/toolgate.db" || cfg.Listen != (Listen{MCP: "127.0.0.1:7070", Admin: "127.0.0.1:7071", AdminSet: true,
		ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}) {
		t.Errorf("storage/listen = %+v %+v", cfg.Storage, cfg.Listen)
	}
	// The filesystem server's tools (server-filesystem 2026.8.31).
	want := map[string]policy.Effect{
		"read_file": policy.Allow, "read_text_file": policy.Allow, "read_media_file": policy.Allow,
		"read_multiple_files": policy.Allow, "list_directory": policy.Allow, "list_directory_with_sizes": policy.Allow,
		"list_allowed_directories": policy.Allow, "directory_tree": policy.Allow, "search_files": policy.Allow,
		"get_file_info": policy.Allow,
		"write_file":    policy.Approve, "edit_file": policy.Approve, "create_directory": policy.Approve,
		"move_file": policy.Deny, "delete_file": policy.Deny,
		"some_new_tool": policy.Approve,
	}
	for tool, effect := range want {
		d, err := cfg.Policy.Evaluate(policy.Call{Server: "fs", Tool: tool})
		if err != nil {
			t.Fatal(err)
		}
		if d.Effect != effect {
			t.Errorf("fs.%s: %s by %q, want %s", tool, d.Effect, d.Rule, effect)
		}
		if d.Effect == policy.Approve && d.Approval.Timeout != 5*time.Minute {
			t.Errorf("fs.%s: timeout %s, want 5m", tool, d.Approval.Timeout)
		}
	}
}

// TestDesignExample loads the example in DESIGN "Config keys"
// (testdata/design.yaml, copied verbatim).
func TestDesignExample(t *testing.T) {
	env := MapEnv(map[string]string{"DATABASE_URL": "postgres://db/toolgate", "PAY_TOKEN": "pay"})
	cfg, err := LoadFile("testdata/design.yaml", env)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Servers["pay"].Headers["Authorization"]; got != "Bearer pay" {
		t.Errorf("pay Authorization = %q", got)
	}
	d, err := cfg.Policy.Evaluate(policy.Call{Server: "pay", Tool: "transfer"})
	if err != nil {
		t.Fatal(err)
	}
	want := policy.Decision{Effect: policy.Approve, Rule: "payments need two", Matched: []string{"payments need two"},
		Approval:    policy.Approval{Timeout: 10 * time.Minute, Mode: "hold", Approvals: 2, Approvers: []string{"group:ops"}, ValidFor: 10 * time.Minute},
		TimeoutRule: "payments need two"}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("pay.transfer (-want +got):\n%s", diff)
	}
	// One reviewer in ops cannot give two approvals; and desktop acts for
	// alice, the only approver, so nobody may review its held calls.
	if diff := cmp.Diff([]string{
		`policy.approval: needs 1 approvals but agents[0] "desktop" acts for "alice", who may not review its calls: only 0 of the 1 eligible approver(s) can, so each call it would hold is refused at once (code quorum_unreachable; nothing is held or run): add an approver it does not act for, or lower approvals`,
		`policy.rules[2] "payments need two".approval: needs 2 approvals but only 1 configured approver(s) are eligible`}, cfg.Warnings()); diff != "" {
		t.Errorf("Warnings (-want +got):\n%s", diff)
	}
	if _, err := LoadFile("testdata/design.yaml", nil); err == nil || !strings.Contains(err.Error(), "${DATABASE_URL} is not set") {
		t.Errorf("without env: %v", err)
	}
}

func TestAdminSet(t *testing.T) {
	for _, tt := range []struct {
		text string
		want Listen
	}{
		{"listen: {mcp: 127.0.0.1:0}", Listen{MCP: "127.0.0.1:0", Admin: "127.0.0.1:7071"}},
		{"listen: {admin: 127.0.0.1:0}", Listen{MCP: "127.0.0.1:7070", Admin: "127.0.0.1:0", AdminSet: true}},
		{`listen: {admin: ""}`, Listen{MCP: "127.0.0.1:7070", Admin: "", AdminSet: true}},
	} {
		tt.want.ReadHeaderTimeout, tt.want.IdleTimeout = 10*time.Second, time.Minute
		if got := mustLoad(t, tt.text, nil).Listen; got != tt.want {
			t.Errorf("%s: Listen = %+v, want %+v", tt.text, got, tt.want)
		}
	}
}

func TestRetention(t *testing.T) {
	if d := Default().Retention; d.Requests != 90*24*time.Hour || d.Events != 90*24*time.Hour || d.Sessions != 90*24*time.Hour {
		t.Errorf("default retention = %+v, want 90 days each", d)
	}
	cfg := mustLoad(t, "retention: { requests: 720h, events: 0s }\n", nil)
	if got := cfg.Retention; got.Requests != 720*time.Hour || got.Events != 0 || got.Sessions != 90*24*time.Hour {
		t.Errorf("retention = %+v, want requests 720h, events kept forever, sessions the default", got)
	}
	_, err := load(t, "retention: { sessions: -1h }\n", nil)
	if err == nil || !strings.Contains(err.Error(), "retention.sessions -1h0m0s: must be >= 0") {
		t.Errorf("negative retention → %v, want an error naming retention.sessions", err)
	}
}
