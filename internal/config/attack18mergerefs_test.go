package config

import (
	"strings"
	"testing"
)

// TestMergedSecretRefsAreSeen (attack18): a ${VAR} in a value that a
// server's headers or env merge in ("<<: {...}" or "<<: *anchor") is a
// reference as one written in place: the decoder applies the merge, so
// the header carries the credential and the env hands the variable over.
// Before, collectRefs did not follow merge keys: a variable behind a
// merged header was no credential of toolgate, and a stdio server could
// be given it (env_passthrough, or an env value referencing it) without
// a word.
func TestMergedSecretRefsAreSeen(t *testing.T) {
	tests := []struct{ name, old, new, want string }{
		{"header merged in, passed through",
			`headers: { Authorization: "Bearer ${PAY_TOKEN}", X-Client: toolgate }`,
			`headers: { <<: { Authorization: "Bearer ${PAY_TOKEN}" }, X-Client: toolgate }`,
			`servers.sh.env_passthrough: PAY_TOKEN holds a credential of toolgate (referenced by servers.pay.headers.Authorization)`},
		{"env merged in references the DSN variable",
			"env: { GREETING: hello, PATH: /opt/bin }",
			`env: { <<: { GREETING: "${DATABASE_URL}" }, PATH: /opt/bin }`,
			`servers.sh.env.GREETING: references ${DATABASE_URL}, which holds a credential of toolgate (referenced by storage.dsn)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := strings.Replace(envConfig, tt.old, tt.new, 1)
			if strings.Contains(tt.name, "passed through") {
				text = strings.Replace(text, "[EDITOR, NOT_SET]", "[PAY_TOKEN]", 1)
			}
			_, err := Load(strings.NewReader(text), MapEnv(map[string]string{
				"DATABASE_URL": "postgres://x", "PAY_TOKEN": "p", "AGENT_TOKEN": "a",
			}))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load = %v, want %q", err, tt.want)
			}
		})
	}
}
