package e2e

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// policy45Policy allows echo_raw for tar, git, find, echo and ls, denies
// it when the command runs rm, and denies everything else.
const policy45Policy = `
policy:
  default: deny
  rules:
    - name: reads
      server: t
      tools: [echo_raw]
      command: {argument: command, match: ["tar *", "git *", "find *", "echo *", "ls *"]}
      effect: allow
    - name: no rm
      server: t
      tools: [echo_raw]
      command: {argument: command, match: ["rm *"]}
      effect: deny
`

// TestShellStringsThatRunCommandsLater (policy45) calls a tool through the
// binary with arguments that run rm where the matcher saw no rm: an option
// that names a command (tar --to-command), git configuration that a later
// git command runs, a line appended to ~/.bashrc, a command find -exec
// runs, and an environment argument that sets PAGER. On ca0a3f75 the allow
// rule let the tar, git config, echo and find ones run (the upstream
// recorded them) and the env one too; the rule "no rm" must deny each, and
// none reach the upstream. A plain tar listing, a find with -name and ls
// with a harmless environment still run, and ls with PATH in its
// environment is refused (the default denies it).
func TestShellStringsThatRunCommandsLater(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record")
	g := startGateway(t, gatewayConfig(filepath.Join(dir, "tg.db"), upstreamServer(record)+policy45Policy), nil)
	cs := g.connect(t, nil, nil)
	args := func(a map[string]any) string {
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, a := range []map[string]any{
		{"command": `tar --to-command='rm -rf ~' -xf a.tar`},
		{"command": `git config core.pager 'rm -rf ~'`},
		{"command": `echo 'rm -rf ~' >> ~/.bashrc`},
		{"command": `find ~ -maxdepth 0 -exec rm -rf {} +`},
		{"command": "git log", "env": map[string]any{"PAGER": "rm -rf ~"}},
	} {
		msg := mustIsError(t, await(t, callAsync(t.Context(), cs, toolCall("t__echo_raw", args(a)))))
		if !strings.Contains(msg, `denied by policy rule "no rm"`) {
			t.Errorf("arguments %s: %q, want a denial by the rule \"no rm\"", args(a), msg)
		}
	}
	held := map[string]any{"command": "ls", "env": map[string]any{"PATH": "/tmp/x"}}
	if msg := mustIsError(t, await(t, callAsync(t.Context(), cs, toolCall("t__echo_raw", args(held))))); strings.Contains(msg, `"no rm"`) {
		t.Errorf("arguments %s: %q, want the default's denial, not the rule \"no rm\"", args(held), msg)
	}
	var want []string
	for _, a := range []map[string]any{
		{"command": "tar -tf a.tar"},
		{"command": "find . -name '*.go'"},
		{"command": "ls", "env": map[string]any{"CI": "1"}},
	} {
		mustOK(t, await(t, callAsync(t.Context(), cs, toolCall("t__echo_raw", args(a)))))
		want = append(want, "echo_raw "+args(a))
	}
	if got := readRecord(t, record); !slices.Equal(got, want) {
		t.Errorf("executions %q, want %q", got, want)
	}
}
