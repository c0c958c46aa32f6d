package config

import (
	"strings"
	"testing"
)

// TestCommandLineSecretRefsAreRefused (attack20): a stdio server's
// command, args or dir that references a variable holding a secret of
// toolgate is refused, as an env value that references one is: the
// server gets its command line (and every local user sees it in ps),
// so `args: [-c, "echo ${PAY_TOKEN}"]` handed it an HTTP upstream's
// credential. Before, only env and env_passthrough were checked: the
// config loaded and the server started with the token in its argv.
func TestCommandLineSecretRefsAreRefused(t *testing.T) {
	tests := []struct{ name, server, want string }{
		{"args", "command: bash\n    args: [-c, \"echo ${PAY_TOKEN}\"]",
			`servers.sh.args[1]: references ${PAY_TOKEN}, which holds a credential of toolgate (referenced by servers.pay.headers.Authorization)`},
		{"args aliased", "command: bash\n    args: &a [\"${DATABASE_URL}\"]",
			`servers.sh.args[0]: references ${DATABASE_URL}, which holds a credential of toolgate (referenced by storage.dsn)`},
		{"command", "command: \"/opt/${AGENT_TOKEN}/bin\"",
			`servers.sh.command: references ${AGENT_TOKEN}, which holds the token of agents[0] "desktop"`},
		{"dir", "command: bash\n    dir: \"/tmp/${PAY_TOKEN}\"",
			`servers.sh.dir: references ${PAY_TOKEN}, which holds a credential of toolgate`},
	}
	env := MapEnv(map[string]string{"DATABASE_URL": "postgres://x", "PAY_TOKEN": "p", "AGENT_TOKEN": "a"})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := strings.Replace(envConfig, "command: bash", tt.server, 1)
			_, err := Load(strings.NewReader(text), env)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load = %v, want %q", err, tt.want)
			}
		})
	}
	// A variable of the server's own is fine.
	text := strings.Replace(envConfig, "command: bash", "command: bash\n    args: [-c, \"echo ${GREETING_WORD}\"]", 1)
	if _, err := Load(strings.NewReader(text), MapEnv(map[string]string{"DATABASE_URL": "postgres://x", "PAY_TOKEN": "p", "AGENT_TOKEN": "a", "GREETING_WORD": "hi"})); err != nil {
		t.Fatalf("Load with an unrelated variable in args: %v", err)
	}
}

// TestCommandLineSecretValuesAreRefused (attack20): a stdio server's
// command line that holds one of toolgate's secrets written out (not
// through a variable) is refused when the upstreams' environments are
// computed, as such an env value is, naming the key and never the value.
func TestCommandLineSecretValuesAreRefused(t *testing.T) {
	text := strings.Replace(envConfig, "command: bash", "command: bash\n    args: [-c, \"curl -H 'Authorization: Bearer pay-token-0123456789abcdef' x\"]", 1)
	cfg, all, secrets := envFixture(t, text, nil)
	_, _, err := cfg.UpstreamEnvs(environ(all), secrets)
	want := "servers.sh.args[1]: the value is or holds the value of servers.pay.headers.Authorization"
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "pay-token-") {
		t.Fatalf("UpstreamEnvs = %v, want %q without the value", err, want)
	}
}
