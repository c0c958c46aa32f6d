package config

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const sha = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" // sha256("test")

// valid is a config exercising every section; each validation case breaks
// one thing in it.
const valid = `
listen: { mcp: "127.0.0.1:0", admin: "unix:///run/toolgate/admin.sock" }
storage: { driver: sqlite, path: /tmp/t.db }
servers:
  fs: { command: npx, args: [a], env: { K: V }, call_timeout: 60s }
  pay: { url: "https://pay.example/mcp", headers: { Authorization: x } }
agents:
  - { id: desktop, token_env: AGENT_TOKEN, on_behalf_of: erin }
approvers:
  - { id: alice, token_sha256: ` + sha + `, roles: [approver], groups: [ops] }
  - { id: bob, token_file: /run/bob, roles: [admin, viewer], groups: [ops] }
approvals: { redact: { keys: [password], patterns: ["^sk-"] } }
stdio: { agent: desktop }
policy:
  rules:
    - { name: reads, server: fs, tools: ["read_*"], effect: allow }
    - { name: pay, server: pay, effect: approve, approval: { approvals: 2, approvers: ["group:ops"] } }
    - { name: any-git, server: "g*", effect: deny }
`

func TestValidConfig(t *testing.T) {
	cfg := mustLoad(t, valid, nil)
	if w := cfg.Warnings(); len(w) != 1 || !strings.Contains(w[0], `"g*" matches no configured server`) {
		t.Errorf("Warnings = %q", w)
	}
}

// edit replaces old (which must occur once) in valid with new.
func edit(t *testing.T, old, new string) string {
	t.Helper()
	if strings.Count(valid, old) != 1 {
		t.Fatalf("%q does not occur exactly once in the valid config", old)
	}
	return strings.Replace(valid, old, new, 1)
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name      string
		old, new  string
		want      []string
		unwanted  string // must not appear (e.g. a secret)
		extraText string // appended to the config
	}{
		{name: "mcp address", old: `mcp: "127.0.0.1:0"`, new: `mcp: "localhost"`, want: []string{`listen.mcp "localhost"`}},
		{name: "mcp port", old: `mcp: "127.0.0.1:0"`, new: `mcp: "127.0.0.1:http"`, want: []string{`listen.mcp`}},
		{name: "mcp empty", old: `mcp: "127.0.0.1:0"`, new: `mcp: ""`, want: []string{`listen.mcp: required`}},
		{name: "admin relative socket", old: `unix:///run/toolgate/admin.sock`, new: `unix://run/admin.sock`, want: []string{`listen.admin "unix://run/admin.sock": socket path "run/admin.sock" is relative`}},
		{name: "admin unclean socket", old: `unix:///run/toolgate/admin.sock`, new: `unix:///run/../admin.sock`, want: []string{`listen.admin`}},
		{name: "admin tcp", old: `unix:///run/toolgate/admin.sock`, new: `127.0.0.1:7071`},
		{name: "admin off", old: `unix:///run/toolgate/admin.sock`, new: ``},
		{name: "admin equals mcp", old: `mcp: "127.0.0.1:0", admin: "unix:///run/toolgate/admin.sock"`, new: `mcp: "127.0.0.1:7070", admin: "127.0.0.1:7070"`, want: []string{"same address"}},
		{name: "storage driver", old: `driver: sqlite`, new: `driver: mysql`, want: []string{`storage.driver "mysql"`}},
		{name: "sqlite path", old: `path: /tmp/t.db`, new: `path: ""`, want: []string{`storage.path: required`}},
		{name: "sqlite dsn", old: `path: /tmp/t.db`, new: `path: /tmp/t.db, dsn: "x"`, want: nil}, // ignored, so ${VAR} can switch drivers
		{name: "postgres dsn", old: `driver: sqlite`, new: `driver: postgres`, want: []string{`storage.dsn: required`}},
		{name: "max conns", old: `path: /tmp/t.db`, new: `path: /tmp/t.db, max_conns: 0`, want: []string{`storage.max_conns 0`}},
		{name: "server name uppercase", old: "  fs: {", new: "  Fs: {", want: []string{"servers.Fs: name must match", `server "fs" is not configured`}},
		{name: "server name underscore", old: "  fs: {", new: "  f_s: {", want: []string{"servers.f_s: name must match", `server "fs" is not configured`}},
		{name: "server name dot", old: "  fs: {", new: "  f.s: {", want: []string{"servers.f.s: name must match", `server "fs" is not configured`}},
		{name: "server name leading dash", old: "  fs: {", new: "  -fs: {", want: []string{"servers.-fs: name must match", `server "fs" is not configured`}},
		{name: "server name reserved", old: "  fs: {", new: "  toolgate: {", want: []string{`servers.toolgate: name "toolgate" is reserved`, `server "fs" is not configured`}},
		{name: "server name too long", old: "  fs: {", new: "  " + strings.Repeat("a", 62) + ": {", want: []string{"is 62 characters, at most 61", `server "fs" is not configured`}},
		{name: "server name at limit", old: "  fs: {", new: "  " + strings.Repeat("a", 61) + ": {", want: []string{`server "fs" is not configured`}},
		{name: "server neither", old: `{ command: npx, args: [a], env: { K: V }, call_timeout: 60s }`, new: `{ call_timeout: 60s }`, want: []string{"servers.fs: set one of command"}},
		{name: "server both", old: `command: npx,`, new: `command: npx, url: "http://x/",`, want: []string{"servers.fs: set only one"}},
		{name: "url scheme", old: `https://pay.example/mcp`, new: `ftp://pay.example/mcp`, want: []string{`servers.pay.url: scheme "ftp"`}},
		{name: "url no host", old: `https://pay.example/mcp`, new: `http:///mcp`, want: []string{`servers.pay.url: no host`}},
		{name: "url does not parse; secret not echoed", old: `https://pay.example/mcp`, new: `http://user:s3cret@[::1/mcp`, want: []string{`servers.pay.url: does not parse`}, unwanted: "s3cret"},
		{name: "stdio fields on url server", old: `headers: { Authorization: x }`, new: `args: [x], dir: /tmp`, want: []string{"servers.pay: args, env, env_passthrough and dir"}},
		{name: "headers on command server", old: `env: { K: V }`, new: `headers: { A: b }`, want: []string{"servers.fs.headers: only for url"}},
		{name: "bad header name", old: `Authorization: x`, new: `"Bad Header": x`, want: []string{`servers.pay.headers: bad header name "Bad Header"`}},
		{name: "header name not a token", old: `Authorization: x`, new: `"X(y)": x`, want: []string{`servers.pay.headers: bad header name "X(y)"`}},
		{name: "header value ends with a newline; secret not echoed", old: `Authorization: x`, new: `Authorization: "Bearer s3cret\n"`, want: []string{`servers.pay.headers.Authorization: the value has a control character`}, unwanted: "s3cret"},
		{name: "header value with NUL", old: `Authorization: x`, new: `Authorization: "a\0b"`, want: []string{`servers.pay.headers.Authorization: the value has a control character`}},
		{name: "header value with tab and obs-text", old: `Authorization: x`, new: `Authorization: "a\tb\xe9"`},
		{name: "negative call timeout", old: `call_timeout: 60s`, new: `call_timeout: -1s`, want: []string{"servers.fs.call_timeout -1s"}},
		{name: "negative connect timeout", old: `call_timeout: 60s`, new: `call_timeout: 60s, connect_timeout: -1s`, want: []string{"servers.fs.connect_timeout -1s"}},
		{name: "connect timeout", old: `call_timeout: 60s`, new: `call_timeout: 60s, connect_timeout: 2m`},
		{name: "sessions per_agent", old: `call_timeout: 60s`, new: `call_timeout: 60s, sessions: per_agent`},
		{name: "client capabilities", old: `call_timeout: 60s`, new: `call_timeout: 60s, client_capabilities: [sampling, elicitation]`},
		{name: "client capability unknown", old: `call_timeout: 60s`, new: `call_timeout: 60s, client_capabilities: [tasks]`, want: []string{`servers.fs.client_capabilities[0] "tasks": want roots, sampling or elicitation`}},
		{name: "sessions unknown", old: `call_timeout: 60s`, new: `call_timeout: 60s, sessions: per_user`, want: []string{`servers.fs.sessions "per_user": want shared or per_agent`}},
		{name: "duplicate id across lists", old: `id: bob`, new: `id: desktop`, want: []string{`approvers[1].id "desktop": also used by agents[0]`}},
		{name: "duplicate id within a list", old: `id: bob`, new: `id: alice`, want: []string{`approvers[1].id "alice": also used by approvers[0]`}},
		{name: "missing id", old: `id: desktop, `, new: ``, want: []string{"agents[0].id: required", `stdio.agent "desktop"`}},
		{name: "id with space", old: `id: bob`, new: `id: "bob smith"`, want: []string{`approvers[1].id "bob smith"`}},
		{name: "group-like id", old: `id: bob`, new: `id: "group:ops"`, want: []string{`approvers[1].id "group:ops": must not start with "group:"`}},
		{name: "no token", old: `token_env: AGENT_TOKEN, `, new: ``, want: []string{"agents[0]: set exactly one of token_env, token_file or token_sha256 (found 0)"}},
		{name: "two tokens", old: `token_file: /run/bob,`, new: `token_file: /run/bob, token_env: BOB,`, want: []string{"approvers[1]: set exactly one"}},
		{name: "bad token env name", old: `token_env: AGENT_TOKEN`, new: `token_env: "$AGENT"`, want: []string{`agents[0].token_env "$AGENT"`}},
		{name: "bad sha256; value not echoed", old: sha, new: "my-plain-token", want: []string{"approvers[0].token_sha256: want 64 hex digits"}, unwanted: "my-plain-token"},
		{name: "uppercase sha256 is fine", old: sha, new: strings.ToUpper(sha)},
		{name: "no roles", old: `roles: [approver], `, new: ``, want: []string{"approvers[0].roles: required"}},
		{name: "bad role", old: `roles: [admin, viewer]`, new: `roles: [admin, root]`, want: []string{`approvers[1].roles[1] "root"`}},
		{name: "empty group", old: `groups: [ops] }
  - { id: bob`, new: `groups: [""] }
  - { id: bob`, want: []string{`approvers[0].groups[0] ""`}},
		{name: "bad redact pattern", old: `"^sk-"`, new: `"^sk-(("`, want: []string{"approvals.redact.patterns[0]: error parsing regexp"}},
		// attack31: it marked every string value and key between every character.
		{name: "redact pattern matching nothing", old: `"^sk-"`, new: `"[0-9]*"`, want: []string{`approvals.redact.patterns[0] "[0-9]*": matches the empty string`}},
		// fixes32: no "" but an empty stretch between two characters.
		{name: "redact pattern matching empty at a word boundary", old: `"^sk-"`, new: `'\b'`, want: []string{`approvals.redact.patterns[0] "\\b": can match an empty stretch between two characters`}},
		{name: "redact pattern with an empty alternative", old: `"^sk-"`, new: `'sk-[a-z]+|x*\b'`, want: []string{`approvals.redact.patterns[0] "sk-[a-z]+|x*\\b": can match an empty stretch`}},
		{name: "redact pattern bounded by word boundaries", old: `"^sk-"`, new: `'\bsk-[a-z]+\b'`},
		{name: "empty redact key", old: `keys: [password]`, new: `keys: [""]`, want: []string{"approvals.redact.keys[0]: empty"}},
		{name: "approval limits", old: `approvals: { redact`, new: `approvals: { keepalive: 0s, max_pending_per_principal: 0, max_pending: -1, retry_wait: -1s, max_hold: -1s, result_max_bytes: 100, result_ttl: 0s, sweep_interval: 0s, redact`,
			want: []string{"approvals.keepalive", "approvals.max_pending_per_principal", "approvals.max_pending -1", "approvals.retry_wait", "approvals.max_hold", "approvals.result_max_bytes 100", "approvals.result_ttl", "approvals.sweep_interval"}},
		{name: "public url", old: `approvals: { redact`, new: `approvals: { public_url: "https://gate.example.com/", redact`},
		{name: "public url with a path", old: `approvals: { redact`, new: `approvals: { public_url: "http://10.0.0.5:7071/toolgate", redact`},
		{name: "public url not http", old: `approvals: { redact`, new: `approvals: { public_url: "ftp://gate.example.com", redact`, want: []string{`approvals.public_url "ftp://gate.example.com": scheme "ftp", want http or https`}},
		{name: "public url relative", old: `approvals: { redact`, new: `approvals: { public_url: "/ui", redact`, want: []string{`approvals.public_url "/ui": scheme ""`}},
		{name: "public url query", old: `approvals: { redact`, new: `approvals: { public_url: "https://g.example/?x=1", redact`, want: []string{"must not have a query or fragment"}},
		{name: "public url user; password not echoed", old: `approvals: { redact`, new: `approvals: { public_url: "https://u:pw-s3cret@g.example", redact`, want: []string{"approvals.public_url: must not hold user information"}, unwanted: "s3cret"},
		{name: "web session ttl", old: "policy:\n", new: "web: { session_ttl: 30s }\npolicy:\n", want: []string{"web.session_ttl 30s: want 1m to 720h"}},
		{name: "web session ttl ok", old: "policy:\n", new: "web: { session_ttl: 8h }\npolicy:\n"},
		{name: "stdio agent unknown", old: `agent: desktop`, new: `agent: alice`, want: []string{`stdio.agent "alice": no agent has this id`}},
		{name: "policy errors are prefixed", old: `effect: allow`, new: `effect: permit`, want: []string{`policy.rules[0] "reads": effect "permit"`}},
		{name: "policy default", old: "policy:\n", new: "policy:\n  default: maybe\n", want: []string{`policy.default "maybe"`}},
		{name: "policy source store", old: "policy:\n", new: "policy:\n  source: store\n"},
		{name: "policy source file", old: "policy:\n", new: "policy:\n  source: file\n"},
		{name: "policy source unknown", old: "policy:\n", new: "policy:\n  source: etcd\n", want: []string{`policy.source "etcd": want file or store`}},
		{name: "policy bad glob", old: `tools: ["read_*"]`, new: `tools: ["read_["]`, want: []string{`policy.rules[0] "reads": tools[0]: glob "read_["`}},
		{name: "audit keys", old: "stdio: { agent: desktop }", new: "stdio: { agent: desktop }\naudit: { queue_size: 10, poll: 1s, retention: 720h }"},
		{name: "audit bad keys", old: "stdio: { agent: desktop }", new: "stdio: { agent: desktop }\naudit: { queue_size: 0, poll: 0s, retention: 1m }",
			want: []string{`audit.queue_size: 0, want 1 to`, `audit.poll: must be positive`, `audit.retention: 1m0s is under an hour`}},
		{name: "rule for an unconfigured server", old: `server: fs, tools`, new: `server: fs2, tools`, want: []string{`policy.rules[0] "reads": server "fs2" is not configured (servers: fs, pay)`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := load(t, edit(t, c.old, c.new), nil)
			got := checkLines(t, err, c.want)
			if c.unwanted != "" && strings.Contains(strings.Join(got, "\n"), c.unwanted) {
				t.Errorf("errors echo %q", c.unwanted)
			}
		})
	}
}

// checkLines fails t unless err has one line per entry of want, each
// containing it, and returns the lines.
func checkLines(t *testing.T, err error, want []string) []string {
	t.Helper()
	got := Lines(err)
	if len(got) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("error %d = %q, want it to contain %q", i, got[i], w)
		}
	}
	return got
}

func TestAllErrorsAtOnce(t *testing.T) {
	cfg, err := load(t, `
storage: { driver: mysql }
servers:
  Bad_Name: { command: x }
agents:
  - { id: a }
approvers:
  - { id: a, token_env: A, roles: [god] }
`, nil)
	want := []string{
		`storage.driver "mysql"`,
		"servers.Bad_Name: name must match",
		"agents[0]: set exactly one of",
		`approvers[0].id "a": also used by agents[0]`,
		`approvers[0].roles[0] "god"`,
	}
	got := Lines(err)
	if len(got) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("error %d = %q, want it to contain %q", i, got[i], want[i])
		}
	}
	if cfg.Storage.Driver != "mysql" {
		t.Errorf("Load did not return the decoded config with its validation errors")
	}
}

func TestWarnings(t *testing.T) {
	cases := []struct {
		name  string
		edits [][2]string // old, new
		want  []string
	}{
		{name: "unknown approver id", edits: [][2]string{{`approvers: ["group:ops"]`, `approvers: ["group:ops", carol]`}},
			want: []string{`policy.rules[1] "pay".approval.approvers: "carol" matches no configured approver`}},
		{name: "unknown group", edits: [][2]string{{`approvers: ["group:ops"]`, `approvers: ["group:sec"]`}},
			want: []string{`"group:sec" matches no configured approver`, `policy.rules[1] "pay".approval: nobody configured can review`}},
		{name: "viewer cannot review", edits: [][2]string{{`roles: [admin, viewer]`, `roles: [viewer]`}},
			want: []string{`policy.rules[1] "pay".approval: needs 2 approvals but only 1 configured approver(s) are eligible`}},
		{name: "too many approvals required", edits: [][2]string{{`approvals: 2,`, `approvals: 3,`}},
			want: []string{`needs 3 approvals but only 2`}},
		{name: "policy default approvers", edits: [][2]string{{"policy:\n", "policy:\n  approval: { timeout: 1m, mode: hold, approvals: 1, valid_for: 1m, approvers: [dave] }\n"}},
			want: []string{`policy.approval.approvers: "dave" matches no configured approver`, `policy.approval: nobody configured can review`}},
		{name: "no reviewers at all", edits: [][2]string{{`roles: [approver]`, `roles: [viewer]`}, {`roles: [admin, viewer]`, `roles: [host]`}},
			want: []string{"no approver has role approver or admin"}},
		{name: "glob matching a server", edits: [][2]string{{`server: "g*"`, `server: "p*"`}}, want: nil},
		// An agent acting for one of the two ops approvers leaves one who
		// may review its payments: its requests can only expire.
		{name: "agent acts for a needed approver", edits: [][2]string{{`on_behalf_of: erin`, `on_behalf_of: alice`}},
			want: []string{`policy.rules[1] "pay".approval: needs 2 approvals but agents[0] "desktop" acts for "alice", who may not review its calls: only 1 of the 2 eligible approver(s) can`}},
		{name: "agent acts for the only approver", edits: [][2]string{{`on_behalf_of: erin`, `on_behalf_of: alice`}, {`roles: [admin, viewer]`, `roles: [viewer]`}},
			want: []string{`policy.approval: needs 1 approvals but agents[0] "desktop" acts for "alice", who may not review its calls: only 0 of the 1`,
				`policy.rules[1] "pay".approval: needs 2 approvals but only 1 configured approver(s) are eligible`}},
		{name: "a third approver makes the quorum", edits: [][2]string{{`on_behalf_of: erin`, `on_behalf_of: alice`},
			{"approvals: { redact", "  - { id: carol, token_file: /run/carol, roles: [approver], groups: [ops] }\napprovals: { redact"}}, want: nil},
		// policy.approval decides nothing here (the default does not
		// approve, and every approve rule sets its own): no warning for it.
		{name: "unused policy.approval", edits: [][2]string{{`on_behalf_of: erin`, `on_behalf_of: bob`},
			{"policy:\n", "policy:\n  default: deny\n  approval: { timeout: 1m, mode: hold, approvals: 1, valid_for: 1m, approvers: [bob] }\n"},
			{`server: pay, effect: approve`, `server: pay, principals: [billing], effect: approve`}}, want: nil},
		{name: "policy.approval of an inheriting rule", edits: [][2]string{{`on_behalf_of: erin`, `on_behalf_of: bob`},
			{"policy:\n", "policy:\n  default: deny\n  approval: { timeout: 1m, mode: hold, approvals: 1, valid_for: 1m, approvers: [bob] }\n"},
			{`- { name: reads, server: fs, tools: ["read_*"], effect: allow }`, `- { name: reads, server: fs, tools: ["read_*"], principals: [desktop], effect: approve }`},
			{`server: pay, effect: approve`, `server: pay, principals: [billing], effect: approve`}},
			want: []string{`policy.approval: needs 1 approvals but agents[0] "desktop" acts for "bob", who may not review its calls: only 0 of the 1`}},
		{name: "rule for other principals", edits: [][2]string{{`on_behalf_of: erin`, `on_behalf_of: alice`},
			{`server: pay, effect: approve`, `server: pay, principals: [billing], effect: approve`}}, want: nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text := valid
			for _, e := range c.edits {
				if strings.Count(text, e[0]) != 1 {
					t.Fatalf("%q does not occur exactly once", e[0])
				}
				text = strings.Replace(text, e[0], e[1], 1)
			}
			cfg := mustLoad(t, text, nil)
			var got []string
			for _, w := range cfg.Warnings() {
				if !strings.Contains(w, `"g*" matches no configured server`) {
					got = append(got, w)
				}
			}
			if len(got) != len(c.want) {
				t.Fatalf("warnings:\n%s\nwant %d", strings.Join(got, "\n"), len(c.want))
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
	// A policy that can never require approval needs no approvers.
	cfg := Default()
	cfg.Policy.Default = "allow"
	if w := cfg.Warnings(); w != nil {
		t.Errorf("Warnings = %q, want none", w)
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		t.Helper()
		p := dir + "/" + name
		if err := writeFile(p, text); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", valid)
	cfg, problems, warnings := Check(good, MapEnv(nil)) // tokens are resolved by cmd's preflight, not here
	if problems != nil || len(warnings) != 1 || !strings.HasPrefix(warnings[0], good+": ") {
		t.Errorf("Check(good) = %q, %q", problems, warnings)
	}
	if cfg.Agents[0].ID != "desktop" {
		t.Errorf("Check(good) returned config %+v", cfg.Agents)
	}

	bad := write("bad.yaml", "storage:\n  driver: ${DRIVER}\n  drvier: x\nlisten: { mcp: nope }\n")
	_, problems, _ = Check(bad, MapEnv(nil))
	// Parse problems do not hide validation problems: all are reported at once.
	want := []string{
		bad + `:2: ${DRIVER} is not set`,
		bad + `:3: unknown key "drvier" in storage`,
		bad + `:4: listen.mcp "nope": want host:port`,
	}
	if len(problems) != len(want) {
		t.Fatalf("Check(bad) = %q", problems)
	}
	for i := range want {
		if !strings.HasPrefix(problems[i], want[i]) {
			t.Errorf("problem %d = %q, want prefix %q", i, problems[i], want[i])
		}
	}

	invalid := write("invalid.yaml", "listen: { mcp: nope }\n")
	_, problems, _ = Check(invalid, nil)
	if len(problems) != 1 || !strings.Contains(problems[0], `listen.mcp "nope"`) {
		t.Errorf("Check(invalid) = %q", problems)
	}

	syntax := write("syntax.yaml", "listen:\n  mcp: [\n")
	_, problems, _ = Check(syntax, nil)
	if len(problems) != 1 || !strings.HasPrefix(problems[0], syntax+":2: ") {
		t.Errorf("Check(syntax) = %q", problems)
	}

	_, problems, _ = Check(dir+"/missing.yaml", nil)
	if len(problems) != 1 || !strings.Contains(problems[0], "missing.yaml") {
		t.Errorf("Check(missing) = %q", problems)
	}
}

func TestLoadFileNamesThePath(t *testing.T) {
	p := t.TempDir() + "/c.yaml"
	if err := writeFile(p, "storage: { driver: x }\n"); err != nil {
		t.Fatal(err)
	}
	_, err := LoadFile(p, nil)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), `storage.driver "x"`) {
		t.Errorf("LoadFile = %v", err)
	}
	if diff := cmp.Diff([]string{p + `:1: storage.driver "x": want sqlite or postgres`}, Lines(err)); diff != "" {
		t.Errorf("Lines(LoadFile error) (-want +got):\n%s", diff)
	}
	missing := t.TempDir() + "/missing.yaml"
	_, err = LoadFile(missing, nil)
	if err == nil || err.Error() != missing+": no such file or directory" || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadFile(missing) = %v, want %q naming the file once, and fs.ErrNotExist", err, missing+": no such file or directory")
	}
}
