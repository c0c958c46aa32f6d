package e2e

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestWebhookDefaultsAnnounceInvalidated: a channel that lists no events
// announces an approval that was invalidated at dispatch (here a reload
// that denies the tool between the request and the approval). The
// approver said yes and nothing ran: the defaults announced requested
// and approved only, so the human never heard that the call they
// approved was not run.
func TestWebhookDefaultsAnnounceInvalidated(t *testing.T) {
	rc := startHookReceiver(t, 0)
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	base := gatewayConfig(filepath.Join(dir, "toolgate.db"), upstreamServer(record)) + `
notify:
  poll: 100ms
  channels:
    - name: hook
      type: webhook
      url_env: HOOK_URL
      secret_env: HOOK_SECRET
`
	g := startGateway(t, base+notifyPolicy, map[string]string{"HOOK_URL": rc.URL, "HOOK_SECRET": hookSecret})
	cs := g.connect(t, nil, nil)
	ch := callAsync(t.Context(), cs, toolCall("t__echo_raw", `{"n":"invalidated"}`))
	p := waitPending(t, g.Admin, 1)[0]

	g.writeConfig(t, base+strings.Replace(notifyPolicy, "  rules:\n", "  rules:\n    - { name: no echo now, server: t, tools: [echo_raw], effect: deny }\n", 1))
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	g.waitLog(t, "policy reloaded", "no echo now")
	// The approval's own transaction consumes the call held in serve and
	// invalidates it: bob is told so (truth51; before, the CLI printed
	// "now approved (1 of 1, decided by bob); the call runs when its holder
	// re-checks it …", which was untrue: nothing was going to run).
	if out := mustCLI(t, g.Admin, "approve", p.ID); !strings.Contains(out, `approve recorded; approved (decided by bob), then invalidated: the call did not run (policy now denies the call (rule "no echo now"))`) || strings.Contains(out, "now approved") {
		t.Errorf("approve printed %q, want that the request was invalidated and the call did not run", out)
	}
	if msg := mustIsError(t, await(t, ch)); !strings.Contains(msg, "invalidated") {
		t.Fatalf("the held call got %q, want the invalidation", msg)
	}

	rc.waitEvent(t, p.ID, "invalidated", "")
	if got := readRecord(t, record); len(got) != 0 {
		t.Errorf("the upstream ran %q, want nothing", got)
	}
}
