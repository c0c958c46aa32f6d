package e2e

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// shadowPolicy has an allow rule that an approve rule covers: it never
// decides a call (toolgate policy check warns about it).
const shadowPolicy = `
policy:
  default: deny
  rules:
    - name: writes
      server: t
      effect: approve
    - name: echo is fine
      server: t
      tools: [echo_raw]
      effect: allow
`

// TestServeLogsNeverDecidingRules is polish19's item 2: serve did not log
// the rules that never decide a call (policy.Policy.Shadowed), which only
// `toolgate policy check` printed. It logs them at WARN when a revision
// comes in force (at start and on reload), naming the rules, once per
// revision: a SIGHUP that changes nothing does not log them again.
func TestServeLogsNeverDecidingRules(t *testing.T) {
	dir := t.TempDir()
	base := gatewayConfig(filepath.Join(dir, "toolgate.db"), upstreamServer(filepath.Join(dir, "record.log")))
	g := startGateway(t, base+shadowPolicy, nil)
	const msg = "policy rule never decides a call"
	line := g.waitLog(t, msg, `rule="policy.rules[1] \"echo is fine\""`, "effect=allow", `by="policy.rules[0] \"writes\""`, "by_effect=approve")
	if !strings.Contains(line, "level=WARN") {
		t.Errorf("not a warning: %s", line)
	}

	// The same file again: reloaded, nothing new to say.
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	g.waitLog(t, "policy reloaded", "changes=none")
	if n := strings.Count(g.stderr.String(), msg); n != 1 {
		t.Errorf("%d never-decides lines after a reload that changed nothing, want 1", n)
	}

	// A new revision with another such rule is logged.
	g.writeConfig(t, base+shadowPolicy+"    - {name: echo again, server: t, tools: [echo_raw], effect: allow}\n")
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	g.waitLog(t, msg, `rule="policy.rules[2] \"echo again\""`)
	if n := strings.Count(g.stderr.String(), msg); n != 3 {
		t.Errorf("%d never-decides lines after a new revision, want 3 (1 + 2)", n)
	}
}
