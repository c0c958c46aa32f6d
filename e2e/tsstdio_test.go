package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// tsStdioPolicy allows echo_raw, denies big_result and holds slow, with a
// short max hold: a stdio agent that sends no progress token gets the
// pending answer.
const tsStdioPolicy = `
approvals:
  max_hold: 1s
policy:
  default: allow
  rules:
    - name: no big results
      server: t
      tools: [big_result]
      effect: deny
    - name: slow needs approval
      server: t
      tools: [slow]
      effect: approve
`

// TestTypeScriptV2ClientStdio: a TypeScript SDK v2 client
// (@modelcontextprotocol/client 2.4.0) pinned to 2026-07-28 runs
// `toolgate serve --stdio` and gets toolgate's own answers — a call the
// policy denies, the max-hold pending answer of a held call — as results
// it accepts, as an allowed call's: each carries resultType "complete",
// which the SDK requires of a 2026-07-28 server. On 2b45551b the SDK
// refused both ("missing required resultType").
func TestTypeScriptV2ClientStdio(t *testing.T) {
	node := tsV2Node(t)
	dir := t.TempDir()
	cfg := `
storage:
  driver: sqlite
  path: ` + q(filepath.Join(dir, "toolgate.db")) + `
` + principalsYAML + upstreamServer(filepath.Join(dir, "record.log")) + tsStdioPolicy
	// The client starts the command (its stderr is the client's).
	cmd, _, cdir := gatewayCommand(t, cfg, nil, "--stdio")
	c := startTSClientEnv(t, node, cmd.Env, "v2stdio.mjs", append([]string{cdir,
		"t__echo_raw", `{"client":"ts-v2-stdio"}`,
		"t__big_result", `{}`,
		"t__slow", `{"seconds":0.01}`,
		"--"}, cmd.Args...)...)
	for _, step := range []struct {
		what, want string
		isError    bool
	}{
		{"the allowed call", `{"client":"ts-v2-stdio"}`, false},
		{"the denied call", "no big results", true},
		{"the held call", "re-send the identical call to continue", true},
	} {
		b := c.line(step.what)
		var out struct {
			Result *tsResult `json:"result"`
			Error  string    `json:"error"`
		}
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s: client output %q: %v", step.what, b, err)
		}
		if out.Result == nil {
			t.Errorf("%s: the TypeScript SDK refused the answer: %s", step.what, out.Error)
			continue
		}
		if out.Result.IsError != step.isError || !strings.Contains(strings.ToLower(out.Result.text()), step.want) {
			t.Errorf("%s: %+v, want isError %v with %q", step.what, *out.Result, step.isError, step.want)
		}
	}
	c.wait()
	if t.Failed() {
		t.Logf("client's and toolgate's stderr:\n%s", c.stderr)
	}
}
