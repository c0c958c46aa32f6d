package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestConfigReadsPerfpairsFile reads the listener and upstream from a
// configuration as e2e/perfpair writes it (writeConfig, -upstream http),
// and refuses one without an HTTP upstream (a stdio row).
func TestConfigReadsPerfpairsFile(t *testing.T) {
	d := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(d, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	http := write("http.yaml", "listen: {mcp: \"127.0.0.1:41001\", admin: \"\"}\n"+
		"storage: {driver: sqlite, path: \"/tmp/x/data/toolgate.db\"}\n"+
		"servers:\n  echo:\n    url: \"http://127.0.0.1:41002/mcp\"\n    tool_prefix: false\n"+
		"policy:\n  default: deny\n  rules:\n    - {name: echo allowed, server: echo, tools: [echo], effect: allow}\n")
	listen, up, err := config([]string{"serve", "--config", http, "--insecure-no-auth", "--log-level", "warn"})
	if err != nil {
		t.Fatal(err)
	}
	if listen != "127.0.0.1:41001" || up.Host != "127.0.0.1:41002" || up.Path != "/mcp" {
		t.Errorf("config: listen %q, upstream %v; want 127.0.0.1:41001 and http://127.0.0.1:41002/mcp", listen, up)
	}
	stdio := write("stdio.yaml", "listen: {mcp: \"127.0.0.1:41001\", admin: \"\"}\n"+
		"servers:\n  echo:\n    command: \"/bin/echoserver\"\n    args: []\n")
	if _, _, err := config([]string{"serve", "--config", stdio}); err == nil {
		t.Error("a configuration with a stdio upstream was accepted")
	}
	if _, _, err := config([]string{"serve"}); err == nil {
		t.Error("no --config was accepted")
	}
}
