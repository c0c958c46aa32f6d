package config

import (
	"strings"
	"testing"
)

// TestServersMergeKey is polish19's item 6: "servers: {<<: …}" (a YAML
// merge key directly under servers) was refused by accident: the
// unknown-key check took "<<" for a server's name and each merged server
// for an unknown key of it. The decoder applies the merge, so it loads as
// if the servers were written in place, and what is refused in place is
// refused through it: an unknown key of a merged server, a zero
// connect_timeout (attack18), and a merged server's header credential
// handed to a stdio server (the credential scan follows the merge too).
func TestServersMergeKey(t *testing.T) {
	const head = "listen: { mcp: 127.0.0.1:0 }\n"
	cfg := mustLoad(t, head+"servers:\n  <<: { fs: { command: /bin/true }, pay: { url: \"http://127.0.0.1:9/mcp\" } }\n  pay: { url: \"http://127.0.0.1:9/own\" }\n", nil)
	if s, ok := cfg.Servers["fs"]; !ok || s.Command != "/bin/true" {
		t.Errorf("merged server fs = %+v, %v; want command /bin/true", s, ok)
	}
	if got := cfg.Servers["pay"].URL; got != "http://127.0.0.1:9/own" {
		t.Errorf("pay's url %q: the server written in place should win over the merged one", got)
	}
	if _, ok := cfg.Servers["<<"]; ok || len(cfg.Servers) != 2 {
		t.Errorf("servers %v, want fs and pay", cfg.Servers)
	}

	for _, tt := range []struct{ name, text, want string }{
		{"unknown key of a merged server", head + "servers: { <<: { fs: { comand: /bin/true } } }\n",
			`unknown key "comand" in servers.fs`},
		{"merged zero connect_timeout", head + "servers: { <<: [{ fs: { command: /bin/true, connect_timeout: 0s } }] }\n",
			"servers.fs.connect_timeout: 0s is not allowed"},
	} {
		if _, err := load(t, tt.text, nil); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Load = %v, want %q", tt.name, err, tt.want)
		}
	}
	text := strings.Replace(envConfig, "  pay:\n    url: https://pay.example/mcp\n    headers:",
		"  <<:\n   pay:\n    url: https://pay.example/mcp\n    headers:", 1)
	text = strings.Replace(text, "[EDITOR, NOT_SET]", "[PAY_TOKEN]", 1)
	_, err := Load(strings.NewReader(text), MapEnv(map[string]string{"DATABASE_URL": "postgres://x", "PAY_TOKEN": "p", "AGENT_TOKEN": "a"}))
	if want := "servers.sh.env_passthrough: PAY_TOKEN holds a credential of toolgate (referenced by servers.pay.headers.Authorization)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("merged server's credential passed through: Load = %v, want %q", err, want)
	}
}
