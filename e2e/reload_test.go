package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// reloadPolicyAllow allows t's echo_raw; reloadPolicyDeny denies it.
const (
	reloadPolicyAllow = `
policy:
  default: deny
  rules:
    - name: echo is fine
      server: t
      tools: [echo_raw]
      effect: allow
`
	reloadPolicyDeny = `
policy:
  default: deny
  rules:
    - name: no echo
      server: t
      tools: [echo_raw]
      effect: deny
`
)

// writeConfig replaces g's config file with text, atomically (a rename), so
// a watcher never reads half a file.
func (g *gw) writeConfig(t *testing.T, text string) {
	t.Helper()
	path := filepath.Join(g.Dir, "toolgate.yaml")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestPolicyReloadOnSIGHUP: a call allowed by the policy in force is denied
// after the file is edited and SIGHUP sent; an invalid file sent the same
// way keeps the last valid policy (the call stays denied), and the error is
// logged and counted on /metrics.
func TestPolicyReloadOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	base := gatewayConfig(filepath.Join(dir, "toolgate.db"), upstreamServer(filepath.Join(dir, "record.log")))
	g := startGateway(t, base+reloadPolicyAllow, nil)
	start := g.waitLog(t, "policy in force", "source=file", "revision=sha256:")
	cs := g.connect(t, nil, nil)
	mustOK(t, await(t, callAsync(t.Context(), cs, toolCall("t__echo_raw", `{"n":1}`))))

	g.writeConfig(t, base+reloadPolicyDeny)
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	line := g.waitLog(t, "policy reloaded", "no echo")
	t.Logf("reload: %s", line)
	if !strings.Contains(line, "old_revision="+field(start, "revision")) {
		t.Errorf("reload line does not name the old revision %s: %s", field(start, "revision"), line)
	}
	msg := mustIsError(t, await(t, callAsync(t.Context(), cs, toolCall("t__echo_raw", `{"n":2}`))))
	if !strings.Contains(msg, "denied") {
		t.Errorf("denied call says %q", msg)
	}

	g.writeConfig(t, base+reloadPolicyAllow+"    - { name: broken, effect: permit }\n")
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	fail := g.waitLog(t, "policy reload failed", "the current policy stays in force")
	t.Logf("failed reload: %s", fail)
	if !strings.Contains(fail, `effect \"permit\"`) {
		t.Errorf("failure line does not name the problem: %s", fail)
	}
	mustIsError(t, await(t, callAsync(t.Context(), cs, toolCall("t__echo_raw", `{"n":3}`))))
	m := scrapeMetrics(t, g.Admin)
	if got := m["toolgate_policy_reload_failures_total"]; got != 1 {
		t.Errorf("toolgate_policy_reload_failures_total = %v, want 1", got)
	}
	if got := m["toolgate_policy_reloads_total"]; got != 1 {
		t.Errorf("toolgate_policy_reloads_total = %v, want 1", got)
	}
	// Only the first call ran upstream.
	if got := readRecord(t, filepath.Join(dir, "record.log")); len(got) != 1 {
		t.Errorf("upstream ran %d calls, want 1: %q", len(got), got)
	}
}

// TestPolicyReloadWatch: with --watch an edit of the file is applied
// without a signal.
func TestPolicyReloadWatch(t *testing.T) {
	dir := t.TempDir()
	base := gatewayConfig(filepath.Join(dir, "toolgate.db"), upstreamServer(filepath.Join(dir, "record.log")))
	g := startGateway(t, base+reloadPolicyAllow, nil, "--watch")
	cs := g.connect(t, nil, nil)
	mustOK(t, await(t, callAsync(t.Context(), cs, toolCall("t__echo_raw", `{"n":1}`))))

	g.writeConfig(t, base+reloadPolicyDeny)
	g.waitLog(t, "policy reloaded", "no echo")
	mustIsError(t, await(t, callAsync(t.Context(), cs, toolCall("t__echo_raw", `{"n":2}`))))
}

// field returns the value of key=value in a slog text line ("" if absent).
func field(line, key string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}
