package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// everythingServerWith returns a servers: entry running the npm everything
// server as "ev", with extra lines (indented four spaces) appended.
func everythingServerWith(t *testing.T, extra string) string {
	t.Helper()
	n := findNPM(t)
	return `
servers:
  ev:
    command: ` + q(n.node) + `
    args: [` + q(n.script(t, "mcp-server-everything")) + `, stdio]
` + extra
}

// TestUpstreamEnvironmentHoldsNoSecrets: the everything server's get-env
// tool, allowed by a rule, prints the upstream's whole environment; it
// shows none of toolgate's tokens (from token_env, token_file and --dev)
// and no token_env variable, and nothing of toolgate's environment that
// was not passed on purpose (issue 9 item 1).
func TestUpstreamEnvironmentHoldsNoSecrets(t *testing.T) {
	dir := t.TempDir()
	fileToken := "e2e-file-token-3c9a5d71b2e4"
	tokenFile := filepath.Join(dir, "carol.token")
	if err := os.WriteFile(tokenFile, []byte(fileToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The standard principals (token_env) plus carol, whose token is a file.
	principals := strings.Replace(principalsYAML, "approvers:\n", "approvers:\n  - id: carol\n    token_file: "+q(tokenFile)+"\n    roles: [approver]\n", 1)
	cfg := `
listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }
storage: { driver: sqlite, path: ` + q(filepath.Join(dir, "toolgate.db")) + ` }
` + principals + everythingServerWith(t, `    env: { GREETING: hello }
    env_passthrough: [E2E_PASSED]
`) + `
policy:
  default: approve
  rules:
    - { name: env is readable, server: ev, tools: [get-env], effect: allow }
`
	g := startGateway(t, cfg, map[string]string{"E2E_PASSED": "passed", "E2E_NOT_PASSED": "kept"}, "--dev")
	// The token lines are written before the ready file, but stderr reaches
	// g.stderr through a pipe copied by os/exec: wait until both arrived.
	g.waitLog(t, "agent token", "tg_dev_")
	g.waitLog(t, "approver token", "tg_dev_")
	var devTokens []string
	for _, line := range strings.Split(g.stderr.String(), "\n") {
		if i := strings.Index(line, "tg_dev_"); i >= 0 {
			devTokens = append(devTokens, strings.TrimSpace(line[i:]))
		}
	}
	if len(devTokens) != 2 {
		t.Fatalf("found %d --dev tokens on stderr, want 2:\n%s", len(devTokens), g.stderr)
	}
	cs := g.connect(t, nil, nil)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "ev__get-env", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("ev__get-env: %v %s", err, text(res))
	}
	out := text(res)
	var env map[string]string
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		t.Fatalf("get-env result is not the JSON environment: %v\n%s", err, out)
	}
	for _, name := range []string{"E2E_AGENT_TOKEN", "E2E_APPROVER_TOKEN", "E2E_NOT_PASSED", "TOOLGATE_TEST_POSTGRES"} {
		if _, ok := env[name]; ok {
			t.Errorf("the upstream's environment has %s", name)
		}
	}
	for _, secret := range append([]string{agentToken, approverToken, fileToken}, devTokens...) {
		if strings.Contains(out, secret) {
			t.Errorf("the upstream's environment shows a token (%.12s…)", secret)
		}
	}
	if env["E2E_PASSED"] != "passed" || env["GREETING"] != "hello" || env["PATH"] == "" {
		t.Errorf("the upstream lacks what it was given: E2E_PASSED=%q GREETING=%q PATH=%q", env["E2E_PASSED"], env["GREETING"], env["PATH"])
	}
}

// refuseToStart runs `toolgate serve` with cfgYAML, which must refuse to
// start, and returns its exit status and stderr.
func refuseToStart(t *testing.T, cfgYAML string, env map[string]string, extraArgs ...string) (int, string) {
	t.Helper()
	cmd, stderr, _ := gatewayCommand(t, cfgYAML, env, extraArgs...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(waitFor(t)):
		_ = cmd.Process.Kill()
		if err := <-done; err != nil {
			t.Logf("killed: %v", err)
		}
		t.Fatalf("toolgate serve still runs after %v; want it to refuse to start\nstderr:\n%s", waitFor(t), stderr)
	}
	if strings.Contains(stderr.String(), "WARNING: DATA RACE") {
		t.Errorf("toolgate serve reported a data race:\n%s", stderr)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), stderr.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, stderr.String()
}

// TestEnvSecretRefused: a config that passes a secret to an upstream
// through env: or env_passthrough is refused (status 2) with a message
// naming the key, and `policy check` refuses it alike.
func TestEnvSecretRefused(t *testing.T) {
	for _, tt := range []struct{ name, extra, want string }{
		{"env references a token variable", `    env: { LEAK: "${E2E_APPROVER_TOKEN}" }` + "\n",
			`servers.ev.env.LEAK: references ${E2E_APPROVER_TOKEN}, which holds the token of approvers[0] "bob"`},
		{"env holds a token", `    env: { LEAK: ` + approverToken + ` }` + "\n",
			`servers.ev.env.LEAK: the value is the token of approvers[0] "bob"`},
		{"passthrough of a copy of a token", "    env_passthrough: [COPY]\n",
			`servers.ev.env_passthrough: the value of COPY is the token of agents[0] "agent-1"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := gatewayConfig(filepath.Join(dir, "toolgate.db"), everythingServerWith(t, tt.extra))
			env := map[string]string{"COPY": agentToken}
			code, stderr := refuseToStart(t, cfg, env)
			if code != 2 || !strings.Contains(stderr, tt.want) {
				t.Errorf("toolgate serve exited %d, want 2 naming %q\nstderr:\n%s", code, tt.want, stderr)
			}
			if strings.Contains(stderr, approverToken) || strings.Contains(stderr, agentToken) {
				t.Error("stderr shows a token")
			}
			path := filepath.Join(dir, "check.yaml")
			if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			checkEnv := map[string]string{"COPY": agentToken}
			for k, v := range tokenEnv {
				checkEnv[k] = v
			}
			res := runToolgateEnv(t, checkEnv, "policy", "check", path)
			if res.Code != 2 || !strings.Contains(res.Stderr, tt.want) {
				t.Errorf("policy check exited %d, want 2 naming %q\nstderr:\n%s", res.Code, tt.want, res.Stderr)
			}
		})
	}
}
