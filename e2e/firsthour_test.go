package e2e

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFirstHourTrips runs the built binary the way a new user trips on it:
// a storage.dsn that does not parse is an invalid config (exit 2) for
// policy check, serve and audit verify alike, and none of them shows the
// string (pgx's own error showed "password = x"); help asked for goes to
// stdout; and a serve whose address is taken (the walkthrough started
// twice) says what to do.
func TestFirstHourTrips(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"E2E_AGENT_TOKEN": agentToken, "E2E_APPROVER_TOKEN": approverToken}
	principals := `agents:
  - { id: agent-1, token_env: E2E_AGENT_TOKEN }
approvers:
  - { id: alice, token_env: E2E_APPROVER_TOKEN, roles: [admin] }
policy: { default: allow }
`
	const password = "pg-s3cret-e2e-41"
	bad := writeFile(t, filepath.Join(dir, "dsn.yaml"), `listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }
storage: { driver: postgres, dsn: "host=127.0.0.1 password = `+password+` sslmode=bogus" }
`+principals)
	const want = "storage.dsn: invalid Postgres connection string: failed to configure TLS (sslmode is invalid)"
	for _, args := range [][]string{{"policy", "check", bad}, {"serve", "--config", bad}, {"audit", "verify", "--config", bad}} {
		res := runToolgateEnv(t, env, args...)
		if res.Code != 2 || !strings.Contains(res.Stderr, want) {
			t.Errorf("toolgate %s: exit %d, want 2 naming %q\nstderr:\n%s", strings.Join(args, " "), res.Code, want, res.Stderr)
		}
		if strings.Contains(res.Stdout+res.Stderr, password) {
			t.Errorf("toolgate %s shows the DSN's password:\n%s", strings.Join(args, " "), res.Stderr)
		}
	}

	for _, args := range [][]string{{"serve", "-h"}, {"policy", "check", "-h"}, {"audit", "verify", "-h"}} {
		res := runToolgateEnv(t, nil, args...)
		if res.Code != 0 || !strings.Contains(res.Stdout, "sage: toolgate "+args[0]) || res.Stderr != "" {
			t.Errorf("toolgate %s: exit %d, want 0 with the help on stdout only\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), res.Code, res.Stdout, res.Stderr)
		}
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = busy.Close() }()
	taken := writeFile(t, filepath.Join(dir, "taken.yaml"), "listen: { mcp: "+busy.Addr().String()+", admin: 127.0.0.1:0 }\nstorage: { path: "+q(filepath.Join(dir, "toolgate.db"))+" }\n"+principals)
	res := runToolgateEnv(t, env, "serve", "--config", taken)
	if res.Code != 1 || !strings.Contains(res.Stderr, "listen.mcp: ") || !strings.Contains(res.Stderr, "often a toolgate serve still running: stop it") {
		t.Errorf("serve on a taken address: exit %d, want 1 naming listen.mcp and what to do\nstderr:\n%s", res.Code, res.Stderr)
	}
}

// TestFirstHourConfigMistakes runs the built binary on config mistakes a
// new user makes, as separate processes: a single value where a list is
// wanted ("tools: move_file") and a token variable with a typo in its name.
// policy check and serve both exit 2 and name the file, the line and the
// key; the first says what to write instead of go-yaml's "cannot unmarshal
// !!str `move_file` into []string", the second names its agent's line as the
// config's other problems do. A --log-level serve does not know names the
// levels it does.
func TestFirstHourConfigMistakes(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"E2E_AGENT_TOKEN": agentToken, "E2E_APPROVER_TOKEN": approverToken}
	head := "listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }\nstorage: { path: " + q(filepath.Join(dir, "toolgate.db")) + " }\n"
	list := writeFile(t, filepath.Join(dir, "list.yaml"), head+`agents:
  - { id: agent-1, token_env: E2E_AGENT_TOKEN }
approvers:
  - { id: alice, token_env: E2E_APPROVER_TOKEN, roles: [approver] }
policy:
  rules:
    - name: no moves
      tools: move_file
      effect: deny
`)
	typo := writeFile(t, filepath.Join(dir, "typo.yaml"), head+`agents:
  - id: agent-1
    token_env: E2E_AGENT_TOKN
approvers:
  - { id: alice, token_env: E2E_APPROVER_TOKEN, roles: [approver] }
`)
	res := runToolgateEnv(t, env, "serve", "--config", typo, "--log-level", "verbose")
	if want := `toolgate: usage: --log-level "verbose": want debug, info, warn or error`; res.Code != 2 || !strings.Contains(res.Stderr, want) {
		t.Errorf("serve --log-level verbose: exit %d, want 2 naming %q\nstderr:\n%s", res.Code, want, res.Stderr)
	}
	for _, tc := range []struct{ path, want string }{
		{list, list + `:10: policy.rules[0].tools: "move_file" is a single value; want a list: write [move_file]`},
		{typo, typo + `:4: agents[0] "agent-1": token_env E2E_AGENT_TOKN is not set`},
	} {
		for _, args := range [][]string{{"policy", "check", tc.path}, {"serve", "--config", tc.path}} {
			res := runToolgateEnv(t, env, args...)
			if res.Code != 2 || !strings.Contains(res.Stderr, tc.want) || strings.Contains(res.Stderr, "cannot unmarshal") {
				t.Errorf("toolgate %s: exit %d, want 2 naming %q\nstderr:\n%s", strings.Join(args, " "), res.Code, tc.want, res.Stderr)
			}
		}
	}
}

// writeFile writes text to path (mode 0600) and returns path.
func writeFile(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
