package e2e

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFirstTenCheckSaysAllAtOnce (newuser37) runs `toolgate policy check`
// as a new user does, as a separate process. A file with a problem of its
// own also gets, in the same run, what the environment lacks (a token
// variable not set, with its line; an upstream command not there, as a
// warning): one fix-and-rerun round, not two. A clean file whose webhook
// signing secret is short passes with a warning that names the channel,
// the variable, the length and the minimum, never the secret.
func TestFirstTenCheckSaysAllAtOnce(t *testing.T) {
	dir := t.TempDir()
	head := "listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }\nstorage: { path: " + q(filepath.Join(dir, "toolgate.db")) + " }\n"
	both := writeFile(t, filepath.Join(dir, "both.yaml"), head+`agents:
  - id: agent-1
    token_env: E2E_AGENT_TOKN
approvers:
  - { id: alice, token_env: E2E_APPROVER_TOKEN, roles: [approver] }
servers:
  fs: { command: no-such-mcp-server-e2e }
policy:
  default: alow
`)
	res := runToolgateEnv(t, map[string]string{"E2E_APPROVER_TOKEN": approverToken}, "policy", "check", both)
	for _, want := range []string{
		both + `:11: policy.default "alow"`,
		both + `:4: agents[0] "agent-1": token_env E2E_AGENT_TOKN is not set`,
		`warning: ` + both + `: servers.fs.command "no-such-mcp-server-e2e" is not in PATH`,
		both + `: 2 problem(s)`,
	} {
		if res.Code != 2 || !strings.Contains(res.Stderr, want) {
			t.Errorf("policy check of a file with a problem and an unset token variable: exit %d, want 2 and %q\nstderr:\n%s", res.Code, want, res.Stderr)
		}
	}

	const secret = "hook-s3cret"
	hook := writeFile(t, filepath.Join(dir, "hook.yaml"), head+`agents:
  - { id: agent-1, token_env: E2E_AGENT_TOKEN }
approvers:
  - { id: alice, token_env: E2E_APPROVER_TOKEN, roles: [approver] }
notify:
  channels:
    - { name: ops-hook, type: webhook, url_env: E2E_HOOK_URL, secret_env: E2E_HOOK_SECRET }
`)
	env := map[string]string{"E2E_AGENT_TOKEN": agentToken, "E2E_APPROVER_TOKEN": approverToken, "E2E_HOOK_URL": "https://hooks.example/toolgate", "E2E_HOOK_SECRET": secret}
	res = runToolgateEnv(t, env, "policy", "check", hook)
	want := `warning: ` + hook + `: notify.channels[0] "ops-hook": the signing secret of secret_env E2E_HOOK_SECRET is 11 bytes long; an HMAC-SHA256 key under 32 bytes (RFC 2104) weakens Toolgate-Signature`
	if res.Code != 0 || !strings.Contains(res.Stderr, want) || !strings.Contains(res.Stdout, hook+": ok") || strings.Contains(res.Stdout+res.Stderr, secret) {
		t.Errorf("policy check with a short webhook secret: exit %d, want 0 and %q, without the secret\nstdout:\n%s\nstderr:\n%s", res.Code, want, res.Stdout, res.Stderr)
	}
	env["E2E_HOOK_SECRET"] = strings.Repeat("k", 32)
	if res = runToolgateEnv(t, env, "policy", "check", hook); res.Code != 0 || strings.Contains(res.Stderr, "signing secret") {
		t.Errorf("policy check with a 32-byte webhook secret: exit %d\nstderr:\n%s", res.Code, res.Stderr)
	}
}

// TestFirstTenServeSaysWhereTheStoreIs (newuser37): `toolgate serve`
// started from another directory than its config file's, whose
// storage.path is relative (as the quickstart's ./data/toolgate.db), warns
// that it makes a new, empty store in the working directory and names the
// store beside the config file, then logs the new store's absolute path.
func TestFirstTenServeSaysWhereTheStoreIs(t *testing.T) {
	wd, cfgDir := t.TempDir(), t.TempDir()
	// A store beside the config: the warning reads only its size (an
	// empty file counts as none since errtext39), so a SQLite header does.
	writeFile(t, filepath.Join(cfgDir, "toolgate.db"), "SQLite format 3\x00")
	cfg := writeFile(t, filepath.Join(cfgDir, "quickstart.yaml"), "listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }\nstorage: { path: ./toolgate.db }\n"+`agents:
  - { id: agent-1, token_env: E2E_AGENT_TOKEN }
approvers:
  - { id: alice, token_env: E2E_APPROVER_TOKEN, roles: [approver] }
`)
	cmd := exec.CommandContext(t.Context(), bins.toolgate, "serve", "--config", cfg)
	cmd.Dir = wd
	cmd.Env = append(childEnv(), "E2E_AGENT_TOKEN="+agentToken, "E2E_APPROVER_TOKEN="+approverToken)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "msg=listening") {
			break
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, stderr)
	if err := cmd.Wait(); err != nil {
		t.Errorf("serve: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		`storage.path \"./toolgate.db\" is relative, so it is taken from the working directory ` + wd + `; no store is there, so serve creates a new, empty one at ` + filepath.Join(wd, "toolgate.db"),
		`while a store exists at ` + filepath.Join(cfgDir, "toolgate.db"),
		`msg="new, empty store created; schema migrations are applied" driver=sqlite path=` + filepath.Join(wd, "toolgate.db"),
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("serve's stderr lacks %q:\n%s", want, out.String())
		}
	}
	if w, s := strings.Index(out.String(), "level=WARN msg=\"storage.path"), strings.Index(out.String(), "new, empty store created"); w < 0 || s < w {
		t.Errorf("the warning does not come before the store is created:\n%s", out.String())
	}
}

// TestFirstTenApprovalsListNewestFirst (newuser37): `toolgate approvals
// list`, a separate process against a real gateway holding two calls,
// lists the newer first, as the web inbox does; `--oldest` lists them in
// the REST API's order (its default), as the command did before.
func TestFirstTenApprovalsListNewestFirst(t *testing.T) {
	g, _ := startUpstreamGateway(t, heldEchoPolicy)
	cs := g.connect(t, nil, nil)
	callAsync(t.Context(), cs, toolCall("t__echo_raw", `{"n":1}`))
	first := waitPending(t, g.Admin, 1)[0].ID
	callAsync(t.Context(), cs, toolCall("t__echo_raw", `{"n":2}`))
	var second string
	for _, a := range waitPending(t, g.Admin, 2) {
		if a.ID != first {
			second = a.ID
		}
	}
	rows := func(out string) []string {
		var ids []string
		for _, l := range strings.Split(out, "\n")[1:] {
			if f := strings.Fields(l); len(f) > 0 {
				ids = append(ids, f[0])
			}
		}
		return ids
	}
	if got := rows(mustCLI(t, g.Admin, "list")); len(got) != 2 || got[0] != second || got[1] != first {
		t.Errorf("approvals list rows %v, want [%s %s] (newest first)", got, second, first)
	}
	if got := rows(mustCLI(t, g.Admin, "list", "--oldest")); len(got) != 2 || got[0] != first || got[1] != second {
		t.Errorf("approvals list --oldest rows %v, want [%s %s]", got, first, second)
	}
}
