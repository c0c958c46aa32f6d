package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckRefusesWhatServeRefuses: `policy check` and `serve` run the same
// checks: for each config serve refuses, check exits 2 naming the same
// problem (issue 9 item 9), including the secrets kept from upstreams
// (item 1).
func TestCheckRefusesWhatServeRefuses(t *testing.T) {
	const dsnPassword = "pg-s3cret-7d1c"
	listen := "listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }\nstorage: { path: DB }\n"
	tokenFile := filepath.Join(t.TempDir(), "alice.token")
	if err := os.WriteFile(tokenFile, []byte("file-token-7f3e21c9d0b84a65\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	socketDir := filepath.Join(t.TempDir(), "sock")
	if err := os.Mkdir(socketDir, 0o755); err != nil {
		t.Fatal(err)
	}
	stdio := func(extra string) string {
		return "servers:\n  up:\n    command: /bin/true\n" + extra
	}
	tests := []struct {
		name  string
		cfg   string
		env   map[string]string
		flags []string
		want  string
	}{
		{
			name: "approver group without members",
			cfg: listen + principals + `
policy:
  rules:
    - { name: ops only, tools: ["*"], effect: approve, approval: { approvers: ["group:ops"] } }
`,
			want: `no configured approver could review policy.rules[0] "ops only"`,
		},
		{
			name: "env value references a token variable",
			cfg:  listen + stdio("    env: { GH: \"${CMD_TEST_APPROVER_TOKEN}\" }\n") + principals,
			want: `servers.up.env.GH: references ${CMD_TEST_APPROVER_TOKEN}, which holds the token of approvers[0] "alice"`,
		},
		{
			name: "env value is a token",
			cfg:  listen + stdio("    env: { GH: "+testApproverToken+" }\n") + principals,
			want: `servers.up.env.GH: the value is the token of approvers[0] "alice"`,
		},
		{
			name: "env sets a token variable",
			cfg:  listen + stdio("    env: { CMD_TEST_AGENT_TOKEN: harmless }\n") + principals,
			want: `servers.up.env.CMD_TEST_AGENT_TOKEN: CMD_TEST_AGENT_TOKEN is the variable of the token of agents[0] "agent-1"`,
		},
		{
			name: "passthrough of a token variable",
			cfg:  listen + stdio("    env_passthrough: [CMD_TEST_AGENT_TOKEN]\n") + principals,
			want: `servers.up.env_passthrough: CMD_TEST_AGENT_TOKEN holds the token of agents[0] "agent-1"`,
		},
		{
			name: "passthrough of a variable holding a token file's token",
			cfg: listen + stdio("    env_passthrough: [COPY]\n") + `
agents:
  - { id: agent-1, token_env: CMD_TEST_AGENT_TOKEN }
approvers:
  - { id: alice, token_file: ` + tokenFile + `, roles: [admin] }
`,
			env:  map[string]string{"COPY": "file-token-7f3e21c9d0b84a65"},
			want: `servers.up.env_passthrough: the value of COPY is the token of approvers[0] "alice"`,
		},
		{
			name: "passthrough of a variable behind an upstream header",
			cfg: listen + stdio("    env_passthrough: [PAY_TOKEN]\n") + `  pay:
    url: http://127.0.0.1:9/mcp
    headers: { Authorization: "Bearer ${PAY_TOKEN}" }
` + principals,
			env:  map[string]string{"PAY_TOKEN": "pay-secret"},
			want: `servers.up.env_passthrough: PAY_TOKEN holds a credential of toolgate (referenced by servers.pay.headers.Authorization)`,
		},
		{
			name: "env value contains the Postgres password",
			cfg: "listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }\nstorage: { driver: postgres, dsn: \"postgres://tg:hunter2-hunter2-hunter2@127.0.0.1:1/tg\" }\n" +
				stdio("    env: { PGURL: \"postgres://other:hunter2-hunter2-hunter2@db/x\" }\n") + principals,
			want: `servers.up.env.PGURL: the value holds the password in storage.dsn`,
		},
		{
			// pgx's own error would show this password (it redacts
			// "password=x" but not "password = x") and fail the start
			// with exit 1 after policy check passed.
			name: "dsn that does not parse",
			cfg:  "listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }\nstorage: { driver: postgres, dsn: \"host=127.0.0.1 password = " + dsnPassword + " sslmode=bogus\" }\n" + principals,
			want: "storage.dsn: invalid Postgres connection string: failed to configure TLS (sslmode is invalid)",
		},
		{
			name: "no agent tokens",
			cfg:  listen + "approvers:\n  - { id: alice, token_env: CMD_TEST_APPROVER_TOKEN, roles: [admin] }\n",
			want: "no agent tokens configured",
		},
		{
			name: "token variable unset",
			cfg:  listen + principals,
			env:  map[string]string{"CMD_TEST_AGENT_TOKEN": ""},
			want: "token_env CMD_TEST_AGENT_TOKEN is empty",
		},
		{
			name: "notification secret unset",
			env:  map[string]string{"CMD_TEST_HOOK_SECRET": "hook-secret-0123456789"},
			cfg:  listen + principals + "notify:\n  channels:\n    - { name: ops, type: webhook, url_env: CMD_TEST_HOOK_URL, secret_env: CMD_TEST_HOOK_SECRET }\n",
			want: `notify.channels[0] "ops": url_env CMD_TEST_HOOK_URL is not set`,
		},
		{
			name: "passthrough of a notification URL's copy",
			cfg: listen + stdio("    env_passthrough: [COPY]\n") + principals +
				"notify:\n  channels:\n    - { name: ops, type: webhook, url_env: CMD_TEST_HOOK_URL, secret_env: CMD_TEST_HOOK_SECRET }\n",
			env: map[string]string{"CMD_TEST_HOOK_URL": "https://hooks.example/T0/secret-path-42", "CMD_TEST_HOOK_SECRET": "hook-secret-0123456789",
				"COPY": "https://hooks.example/T0/secret-path-42"},
			want: `servers.up.env_passthrough: the value of COPY is the url of notify.channels[0] "ops"`,
		},
		{
			name: "socket directory not private",
			cfg:  "listen: { mcp: 127.0.0.1:0, admin: \"unix://" + socketDir + "/admin.sock\" }\nstorage: { path: DB }\n" + principals,
			want: "has mode 0755; want 0700",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.cfg)
			sys := testSystem(tt.env)
			var stdout, stderr strings.Builder
			code := checkCmd(append(tt.flags, path), &stdout, &stderr, sys)
			if code != 2 || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("policy check exited %d, want 2 naming %q\nstderr:\n%s", code, tt.want, stderr.String())
			}
			err := serveWith(t.Context(), append([]string{"--config", path}, tt.flags...),
				serveIO{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, sys: sys})
			if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("serve = %v, want an invalid-config error (exit 2) naming %q", err, tt.want)
			}
			for _, secret := range []string{testApproverToken, dsnPassword} {
				if strings.Contains(stderr.String(), secret) || (err != nil && strings.Contains(err.Error(), secret)) {
					t.Errorf("a message shows the secret %q itself", secret)
				}
			}
		})
	}
}

// TestCheckWarningsStayWarnings: a config serve accepts passes check with
// exit 0, its warnings printed; --dev counts as serve --dev does.
func TestCheckWarningsStayWarnings(t *testing.T) {
	path := writeConfig(t, "listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }\nstorage: { path: DB }\n"+principals+`
policy:
  rules:
    - { name: git, server: "git*", effect: deny }
`)
	var stdout, stderr strings.Builder
	if code := checkCmd([]string{path}, &stdout, &stderr, testSystem(nil)); code != 0 {
		t.Fatalf("policy check exited %d\nstderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), `warning: `+path+`: policy.rules[0] "git": server pattern "git*" matches no configured server`) {
		t.Errorf("stderr does not carry the warning:\n%s", stderr.String())
	}
	if !strings.Contains(stdout.String(), path+": ok") {
		t.Errorf("stdout = %q", stdout.String())
	}

	// A token short enough to guess is a warning, not a refusal.
	stderr.Reset()
	stdout.Reset()
	if code := checkCmd([]string{path}, &stdout, &stderr, testSystem(map[string]string{"CMD_TEST_AGENT_TOKEN": "hunter2"})); code != 0 || !strings.Contains(stdout.String(), path+": ok") {
		t.Fatalf("policy check with a short agent token exited %d\nstdout: %s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), `warning: `+path+`: agents[0] "agent-1": the token of token_env CMD_TEST_AGENT_TOKEN is 7 characters long`) || strings.Contains(stderr.String(), "hunter2") {
		t.Errorf("stderr does not warn about the short token (or shows it):\n%s", stderr.String())
	}

	// Without principals, only serve --dev starts; check follows the flag.
	bare := writeConfig(t, "listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }\nstorage: { path: DB }\n")
	stderr.Reset()
	if code := checkCmd([]string{bare}, io.Discard, &stderr, testSystem(nil)); code != 2 || !strings.Contains(stderr.String(), "run with --dev") {
		t.Errorf("policy check without --dev exited %d\n%s", code, stderr.String())
	}
	// Its first problem (policy.default approve, which no one can review)
	// names --dev too, and the warning that said the same in fewer words
	// is not printed beside it (a new user who forgot --dev).
	if want := "no configured approver could review policy.default (approve); add approvers (roles: [approver]), run with --dev for throwaway tokens, or set approvals.allow_no_approvers: true"; !strings.Contains(stderr.String(), want) {
		t.Errorf("policy check without --dev:\n%s\nwant it to contain %q", stderr.String(), want)
	}
	if strings.Contains(stderr.String(), "no approver has role") {
		t.Errorf("policy check without --dev also warns what its error says:\n%s", stderr.String())
	}
	stderr.Reset()
	if code := checkCmd([]string{"--dev", bare}, io.Discard, &stderr, testSystem(nil)); code != 0 {
		t.Errorf("policy check --dev exited %d\n%s", code, stderr.String())
	}
}

// TestCheckTakesServesConfigFlag (attack30): policy check takes the file
// as serve does, --config FILE, as well as FILE; both at once are refused.
// Before, a new user's "policy check --config FILE" (serve's words) was
// answered "flag provided but not defined: -config".
func TestCheckTakesServesConfigFlag(t *testing.T) {
	path := writeConfig(t, "listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }\nstorage: { path: DB }\n"+principals)
	for _, args := range [][]string{{"--config", path}, {"--config=" + path, "--dev"}, {"--dev", "--config", path}} {
		var stdout, stderr strings.Builder
		if code := checkCmd(args, &stdout, &stderr, testSystem(nil)); code != 0 || !strings.Contains(stdout.String(), path+": ok") {
			t.Errorf("policy check %q exited %d\nstdout: %s\nstderr:\n%s", args, code, stdout.String(), stderr.String())
		}
	}
	var stderr strings.Builder
	if code := checkCmd([]string{"--config", path, path}, io.Discard, &stderr, testSystem(nil)); code != 2 || !strings.Contains(stderr.String(), "usage: toolgate policy check") {
		t.Errorf("policy check with --config and FILE exited %d\n%s", code, stderr.String())
	}
}

// TestCheckEmptyConfigPath: an empty path ("--config=", a shell variable
// that was not set, or "") is a usage error naming what is wrong (exit 2),
// as serve answers it; before, policy check answered "open : no such file
// or directory" and ": 1 problem(s)" with exit 1 (attack31's lead). A
// blank one (--config=" ") is the same usage error: on 31ac484 it got
// "open  : no such file or directory" and " : 1 problem(s)" (fixes32).
func TestCheckEmptyConfigPath(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--config="}, `invalid value "" for flag -config: want a file's path`},
		{[]string{"--config", ""}, `invalid value "" for flag -config: want a file's path`},
		{[]string{""}, "the config file's path is empty"},
		{[]string{"--dev", ""}, "the config file's path is empty"},
		{[]string{"--config= "}, `invalid value " " for flag -config: want a file's path`},
		{[]string{"--config", "\t \n"}, `invalid value "\t \n" for flag -config: want a file's path`},
		{[]string{" "}, "the config file's path is empty or blank"},
	} {
		var stdout, stderr strings.Builder
		code := checkCmd(tt.args, &stdout, &stderr, testSystem(nil))
		if code != 2 || !strings.Contains(stderr.String(), tt.want) || !strings.Contains(stderr.String(), "usage: toolgate policy check") || strings.Contains(stderr.String(), "no such file") {
			t.Errorf("policy check %q exited %d, want 2 with %q and the usage\nstdout: %s\nstderr:\n%s", tt.args, code, tt.want, stdout.String(), stderr.String())
		}
	}
}
