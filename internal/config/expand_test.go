package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

func TestExpandString(t *testing.T) {
	env := MapEnv(map[string]string{"HOST": "db.local", "EMPTY": "", "TOKEN": "s3cr$t", "_X1": "x"})
	cases := []struct {
		in       string
		want     string
		problems int
	}{
		{"plain", "plain", 0},
		{"${HOST}", "db.local", 0},
		{"postgres://${HOST}:5432/${HOST}", "postgres://db.local:5432/db.local", 0},
		{"${_X1}", "x", 0},
		{"${MISSING:-fallback}", "fallback", 0},
		{"${HOST:-fallback}", "db.local", 0},
		{"${EMPTY:-fallback}", "fallback", 0}, // set but empty takes the default, as in sh
		{"${EMPTY}", "", 0},                   // set but empty is not an error
		{"${MISSING:-}", "", 0},
		{"${MISSING:-a:-b}", "a:-b", 0},
		{"${MISSING:-{x}", "{x", 0}, // the default runs to the first '}'
		{"${TOKEN}", "s3cr$t", 0},   // values are not expanded again
		{"$$", "$", 0},
		{"$${HOST}", "${HOST}", 0},
		{"$$$${HOST}", "$${HOST}", 0},
		{"$$${HOST}", "$db.local", 0},
		{"^sk-[a-z]+$", "^sk-[a-z]+$", 0}, // a lone $ is literal
		{"$HOST", "$HOST", 0},             // no braces, no expansion
		{"cost: 5$", "cost: 5$", 0},
		{"${MISSING}", "", 1},
		{"a ${MISSING} b ${ALSO_MISSING}", "a  b ", 2},
		{"${HOST", "${HOST", 1},
		{"${}", "", 1},
		{"${1X}", "", 1},
		{"${A-B}", "", 1},
		{"${HOST:=x}", "", 1},
	}
	for _, c := range cases {
		got, problems := expandString(c.in, env)
		if got != c.want || len(problems) != c.problems {
			t.Errorf("expandString(%q) = %q, %q; want %q with %d problems", c.in, got, problems, c.want, c.problems)
		}
	}
}

func TestEnvExpansionInConfig(t *testing.T) {
	env := map[string]string{
		"DATABASE_URL": "postgres://u:p@db/toolgate",
		"PAY_TOKEN":    "tok",
		"CONNS":        "25",
		"WORD":         "null",
		"FLAG":         "true",
		"KEY":          "servers",
	}
	// parse, not Load: the server name "${KEY}x" is kept verbatim, which
	// Validate rejects.
	cfg, err := parse(strings.NewReader(`
storage:
  driver: postgres
  dsn: ${DATABASE_URL}
  max_conns: ${CONNS}
servers:
  pay:
    url: http://127.0.0.1:${PAY_PORT:-9000}/mcp
    headers:
      Authorization: "Bearer ${PAY_TOKEN}"
      X-Dollar: "$$5"
      X-Word: ${WORD}
      X-Flag: ${FLAG}
  ${KEY}x:
    command: "echo"
    args: ["${KEY}", '${MISSING:-d}', $$HOME]
approvals:
  allow_no_approvers: ${FLAG}
  redact: { patterns: ["^ghp_[A-Za-z0-9]{36}$"] }
`), MapEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Storage.DSN != env["DATABASE_URL"] || cfg.Storage.MaxConns != 25 {
		t.Errorf("storage = %+v", cfg.Storage)
	}
	pay := cfg.Servers["pay"]
	wantHeaders := map[string]string{"Authorization": "Bearer tok", "X-Dollar": "$5", "X-Word": "null", "X-Flag": "true"}
	if pay.URL != "http://127.0.0.1:9000/mcp" || !cmp.Equal(pay.Headers, wantHeaders) {
		t.Errorf("servers.pay = %+v", pay)
	}
	// Keys are never expanded.
	x, ok := cfg.Servers["${KEY}x"]
	if !ok || !cmp.Equal(x.Args, []string{"servers", "d", "$HOME"}) {
		t.Errorf("servers = %+v", cfg.Servers)
	}
	if !cfg.Approvals.AllowNoApprovers {
		t.Errorf("allow_no_approvers: ${FLAG} with FLAG=true was not decoded as true")
	}
	if got := cfg.Approvals.Redact.Patterns[0]; got != "^ghp_[A-Za-z0-9]{36}$" {
		t.Errorf("pattern = %q", got)
	}
}

func TestUnsetVariablesAreErrorsWithLines(t *testing.T) {
	_, err := load(t, `listen:
  mcp: ${MCP_ADDR}
storage:
  driver: postgres
  dsn: ${DATABASE_URL}
servers:
  pay: { url: "http://x/mcp", headers: { Authorization: "Bearer ${PAY_TOKEN}" } }
`, nil)
	want := []string{
		"line 2: ${MCP_ADDR} is not set",
		"line 5: ${DATABASE_URL} is not set",
		"line 7: ${PAY_TOKEN} is not set",
	}
	got := Lines(err)
	if len(got) != len(want) {
		t.Fatalf("errors = %q, want %d", got, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("error %d = %q, want prefix %q", i, got[i], want[i])
		}
	}
}

func TestExpansionInsideAnchorsHappensOnce(t *testing.T) {
	cfg := mustLoad(t, `
servers:
  a: &srv { command: "run-$$x" }
  b: *srv
`, nil)
	if a, b := cfg.Servers["a"].Command, cfg.Servers["b"].Command; a != "run-$x" || b != "run-$x" {
		t.Errorf("commands = %q, %q; want run-$x twice", a, b)
	}
}

func TestUnknownKeys(t *testing.T) {
	cases := []struct {
		name string
		text string
		want string // line and key
	}{
		{"top level", "listen: {}\nlisens: {}\n", `line 2: unknown key "lisens" in the top level`},
		{"listen", "listen:\n  mcp: 127.0.0.1:1\n  amdin: x\n", `line 3: unknown key "amdin" in listen`},
		{"storage", "storage: { drivr: sqlite }\n", `line 1: unknown key "drivr" in storage`},
		{"server", "servers:\n  fs:\n    command: x\n    arg: [y]\n", `line 4: unknown key "arg" in servers.fs`},
		{"agent", "agents:\n  - id: a\n    token: secret\n", `line 3: unknown key "token" in agents[0]`},
		{"approver", "approvers:\n  - id: a\n    token_env: A\n    role: [admin]\n", `line 4: unknown key "role" in approvers[0]`},
		{"approvals", "approvals: { keep_alive: 1s }\n", `unknown key "keep_alive" in approvals`},
		{"redact", "approvals: { redact: { key: [a] } }\n", `unknown key "key" in approvals.redact`},
		{"stdio", "stdio: { principal: a }\n", `unknown key "principal" in stdio`},
		{"policy", "policy: { defualt: deny }\n", `unknown key "defualt" in policy`},
		{"policy approval", "policy:\n  approval: { timout: 1m }\n", `line 2: unknown key "timout" in policy.approval`},
		{"rule", "policy:\n  rules:\n    - name: r\n      effect: allow\n      tool: [x]\n", `line 5: unknown key "tool" in policy.rules[0]`},
		{"rule approval", "policy:\n  rules:\n    - effect: approve\n    - effect: approve\n      approval: { approver: [a] }\n", `line 5: unknown key "approver" in policy.rules[1].approval`},
		{"through a merge key", "x-base: &b { command: x, bogus: 1 }\n", `unknown key "x-base"`},
		{"merged mapping", "servers:\n  a: &b { command: x }\n  c:\n    <<: *b\n    bogus: 1\n", `line 5: unknown key "bogus" in servers.c`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := load(t, c.text, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Load error = %v, want %q", err, c.want)
			}
			// go-yaml's own strict decoding agrees that the key is unknown.
			dec := yaml.NewDecoder(strings.NewReader(c.text))
			dec.KnownFields(true)
			var cfg Config
			if err := dec.Decode(&cfg); err == nil {
				t.Errorf("yaml KnownFields accepts what Load rejects")
			}
		})
	}
}

func TestAllUnknownKeysAtOnce(t *testing.T) {
	_, err := load(t, "a: 1\nlisten: { b: 2 }\npolicy: { rules: [ { c: 3 } ] }\n", nil)
	if n := len(Lines(err)); n != 3 {
		t.Errorf("got %d errors, want 3:\n%v", n, err)
	}
}

func TestLines(t *testing.T) {
	err := errors.Join(errors.New("a"), errors.Join(errors.New("b"), fmt.Errorf("c\nd")), nil)
	if diff := cmp.Diff([]string{"a", "b", "c", "d"}, Lines(err)); diff != "" {
		t.Errorf("Lines (-want +got):\n%s", diff)
	}
	if Lines(nil) != nil {
		t.Errorf("Lines(nil) != nil")
	}
}
