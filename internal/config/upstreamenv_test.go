package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const envConfig = `
listen: { mcp: "127.0.0.1:0", admin: "127.0.0.1:0" }
storage: { driver: postgres, dsn: "${DATABASE_URL}" }
servers:
  sh:
    command: bash
    env: { GREETING: hello, PATH: /opt/bin }
    env_passthrough: [EDITOR, NOT_SET]
  pay:
    url: https://pay.example/mcp
    headers: { Authorization: "Bearer ${PAY_TOKEN}", X-Client: toolgate }
agents:
  - { id: desktop, token_env: AGENT_TOKEN }
approvers:
  - { id: alice, token_file: ALICE_FILE, roles: [approver] }
`

// envFixture loads envConfig with a token file for alice and returns the
// config, its environment and secrets.
func envFixture(t *testing.T, text string, env map[string]string) (Config, map[string]string, *Secrets) {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "alice.token")
	if err := os.WriteFile(tokenFile, []byte("  alice-file-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	all := map[string]string{
		"AGENT_TOKEN":  "agent-token-abcdef0123456789",
		"DATABASE_URL": "postgres://tg:pg-password-xyz@db.internal/toolgate",
		"PAY_TOKEN":    "pay-token-0123456789abcdef",
	}
	for k, v := range env {
		all[k] = v
	}
	cfg := mustLoad(t, strings.ReplaceAll(text, "ALICE_FILE", tokenFile), all)
	return cfg, all, cfg.Secrets(MapEnv(all), os.ReadFile)
}

func environ(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

func TestUpstreamEnvs(t *testing.T) {
	cfg, env, secrets := envFixture(t, envConfig, map[string]string{
		"PATH": "/usr/bin", "HOME": "/home/tg", "LANG": "C.UTF-8", "LC_ALL": "C", "LC_TIME": "C",
		"TMPDIR": "/tmp", "USER": "tg", "TZ": "UTC", "EDITOR": "vi", "SHELL": "/bin/bash",
		"SSH_AUTH_SOCK": "/run/ssh", "AWS_SECRET_ACCESS_KEY": "aws",
	})
	envs, dropped, err := cfg.UpstreamEnvs(environ(env), secrets)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{"sh": {
		"PATH": "/opt/bin", // env wins over the base
		"HOME": "/home/tg", "LANG": "C.UTF-8", "LC_ALL": "C", "LC_TIME": "C", "TMPDIR": "/tmp", "USER": "tg", "TZ": "UTC",
		"EDITOR": "vi", "GREETING": "hello",
	}}
	if diff := cmp.Diff(want, envs); diff != "" {
		t.Errorf("UpstreamEnvs (-want +got):\n%s", diff)
	}
	if dropped != nil {
		t.Errorf("dropped = %q", dropped)
	}
}

func TestUpstreamEnvsDropsSecretBaseVariables(t *testing.T) {
	cfg, env, secrets := envFixture(t, envConfig, map[string]string{"USER": "agent-token-abcdef0123456789", "HOME": "/h"})
	envs, dropped, err := cfg.UpstreamEnvs(environ(env), secrets)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := envs["sh"]["USER"]; ok || envs["sh"]["HOME"] != "/h" {
		t.Errorf("env = %v, want USER left out", envs["sh"])
	}
	if diff := cmp.Diff([]string{"servers.sh: USER"}, dropped); diff != "" {
		t.Errorf("dropped (-want +got):\n%s", diff)
	}
}

// notifyChannel adds a webhook notification channel whose URL and
// signing secret come from HOOK_URL and HOOK_SECRET.
const notifyChannel = `
notify:
  channels:
    - { name: ops, type: webhook, url_env: HOOK_URL, secret_env: HOOK_SECRET }
`

func TestUpstreamEnvsRefusesSecrets(t *testing.T) {
	tests := []struct {
		name, old, new string
		extra          string // appended to the config
		env            map[string]string
		want           string
	}{
		{name: "env holds a webhook URL", old: "GREETING: hello", new: `GREETING: "https://hooks.example/T0/B0/s3cr3t-path-0123"`, extra: notifyChannel,
			env:  map[string]string{"HOOK_URL": "https://hooks.example/T0/B0/s3cr3t-path-0123", "HOOK_SECRET": "hook-signing-secret-0123456789"},
			want: `servers.sh.env.GREETING: the value is the url of notify.channels[0] "ops"`},
		{name: "passthrough value is a webhook secret", extra: notifyChannel,
			env:  map[string]string{"EDITOR": "hook-signing-secret-0123456789", "HOOK_URL": "https://hooks.example/x", "HOOK_SECRET": "hook-signing-secret-0123456789"},
			want: `servers.sh.env_passthrough: the value of EDITOR is the secret of notify.channels[0] "ops"`},
		{name: "env equals a token_env token", old: "GREETING: hello", new: "GREETING: agent-token-abcdef0123456789",
			want: `servers.sh.env.GREETING: the value is the token of agents[0] "desktop"`},
		{name: "env equals a token file", old: "GREETING: hello", new: "GREETING: alice-file-token-0123456789",
			want: `servers.sh.env.GREETING: the value is the token of approvers[0] "alice"`},
		{name: "env contains a header credential", old: "GREETING: hello", new: `GREETING: "token pay-token-0123456789abcdef"`,
			want: `servers.sh.env.GREETING: the value holds the value of PAY_TOKEN`},
		// newuser48: "Bearer <token>" was reported as "the value is the token".
		{name: "env contains a token", old: "GREETING: hello", new: `GREETING: "Bearer agent-token-abcdef0123456789"`,
			want: `servers.sh.env.GREETING: the value holds the token of agents[0] "desktop"`},
		{name: "passthrough value contains a token", env: map[string]string{"EDITOR": "Bearer agent-token-abcdef0123456789"},
			want: `servers.sh.env_passthrough: the value of EDITOR holds the token of agents[0] "desktop"`},
		{name: "env equals the DSN", old: "GREETING: hello", new: `GREETING: "postgres://tg:pg-password-xyz@db.internal/toolgate"`,
			want: `servers.sh.env.GREETING: the value is`},
		{name: "env equals the DSN password", old: "GREETING: hello", new: "GREETING: pg-password-xyz",
			want: `servers.sh.env.GREETING: the value is the password in storage.dsn`},
		{name: "passthrough value is a token", env: map[string]string{"EDITOR": "agent-token-abcdef0123456789"},
			want: `servers.sh.env_passthrough: the value of EDITOR is the token of agents[0] "desktop"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := envConfig
			if tt.old != "" {
				text = strings.Replace(text, tt.old, tt.new, 1)
			}
			text += tt.extra
			cfg, env, secrets := envFixture(t, text, tt.env)
			_, _, err := cfg.UpstreamEnvs(environ(env), secrets)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("UpstreamEnvs = %v, want %q", err, tt.want)
			}
			for _, v := range env {
				if len(v) > 8 && strings.Contains(err.Error(), v) {
					t.Errorf("the error shows a secret value: %v", err)
				}
			}
		})
	}
}

// TestValidateServerEnv: what can be seen without the environment is
// refused at load, naming the key.
func TestValidateServerEnv(t *testing.T) {
	tests := []struct {
		name, old, new string
		extra          string // appended to the config
		want           string
	}{
		{name: "env sets a token variable", old: "GREETING: hello", new: "AGENT_TOKEN: x",
			want: `servers.sh.env.AGENT_TOKEN: AGENT_TOKEN is the variable of the token of agents[0] "desktop"`},
		{name: "env references a token variable", old: "GREETING: hello", new: `GREETING: "${AGENT_TOKEN}"`,
			want: `servers.sh.env.GREETING: references ${AGENT_TOKEN}, which holds the token of agents[0] "desktop"`},
		{name: "env references the DSN variable", old: "GREETING: hello", new: `GREETING: "${DATABASE_URL}"`,
			want: `servers.sh.env.GREETING: references ${DATABASE_URL}, which holds a credential of toolgate (referenced by storage.dsn)`},
		{name: "passthrough of a header variable", old: "[EDITOR, NOT_SET]", new: "[PAY_TOKEN]",
			want: `servers.sh.env_passthrough: PAY_TOKEN holds a credential of toolgate (referenced by servers.pay.headers.Authorization)`},
		{name: "passthrough of a token variable", old: "[EDITOR, NOT_SET]", new: "[AGENT_TOKEN]",
			want: `servers.sh.env_passthrough: AGENT_TOKEN holds the token of agents[0] "desktop"`},
		{name: "passthrough of OTel headers", old: "[EDITOR, NOT_SET]", new: "[OTEL_EXPORTER_OTLP_HEADERS]",
			want: `servers.sh.env_passthrough: OTEL_EXPORTER_OTLP_HEADERS holds the headers (credentials) of toolgate's trace exporter`},
		{name: "passthrough of PGPASSWORD with postgres", old: "[EDITOR, NOT_SET]", new: "[PGPASSWORD]",
			want: `servers.sh.env_passthrough: PGPASSWORD holds toolgate's Postgres password`},
		{name: "passthrough of the CLI token", old: "[EDITOR, NOT_SET]", new: "[TOOLGATE_TOKEN]",
			want: `servers.sh.env_passthrough: TOOLGATE_TOKEN holds the approver token of the toolgate CLI`},
		{name: "passthrough of a notification secret", old: "[EDITOR, NOT_SET]", new: "[HOOK_SECRET]", extra: notifyChannel,
			want: `servers.sh.env_passthrough: HOOK_SECRET holds the secret of notify.channels[0] "ops"`},
		{name: "passthrough not a name", old: "[EDITOR, NOT_SET]", new: `["A-B"]`,
			want: `servers.sh.env_passthrough[0] "A-B": not a variable name`},
		{name: "passthrough twice", old: "[EDITOR, NOT_SET]", new: "[EDITOR, EDITOR]",
			want: `servers.sh.env_passthrough[1]: EDITOR is listed twice`},
		{name: "passthrough also in env", old: "[EDITOR, NOT_SET]", new: "[GREETING]",
			want: `servers.sh.env_passthrough[0]: GREETING is also set in env`},
		{name: "passthrough on an HTTP server", old: "    headers: {", new: "    env_passthrough: [X]\n    headers: {",
			want: `servers.pay: args, env, env_passthrough and dir are only for command (stdio) servers`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := strings.Replace(envConfig, tt.old, tt.new, 1) + tt.extra
			_, err := Load(strings.NewReader(text), MapEnv(map[string]string{
				"DATABASE_URL": "postgres://x", "PAY_TOKEN": "p", "AGENT_TOKEN": "a",
			}))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestDSNPassword(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://u:p%40ss@h/db":                       "p@ss",
		"postgresql://u@h/db?password=q&sslmode=disable": "q",
		"postgres://h/db":                                "",
		"host=h user=u password=secret dbname=d":         "secret",
		`host=h password='it\'s a \\ secret' dbname=d`:   `it's a \ secret`,
		"host=h dbname=d":                                "",
		"password = spaced":                              "spaced",
	} {
		if got := dsnPassword(dsn); got != want {
			t.Errorf("dsnPassword(%q) = %q, want %q", dsn, got, want)
		}
	}
}

func TestSecretsMatch(t *testing.T) {
	var s Secrets
	s.AddValue("short", "a short one")
	s.AddValue("a-long-secret-value-0123", "a long one")
	for v, want := range map[string]string{
		"short":                           "a short one",
		"not short at all":                "",
		"Bearer a-long-secret-value-0123": "a long one",
		"":                                "",
	} {
		got, _ := s.Match(v)
		if got != want {
			t.Errorf("Match(%q) = %q, want %q", v, got, want)
		}
	}
}
