package e2e

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestDefaultsAnnounceUnknownOutcome: the instance that dispatched an
// approved call dies mid-dispatch; another, on the same database, records
// the outcome unknown once the lease lapses. Channels that list no events
// announce it: the webhook receives the dispatched event with
// approval.dispatch_outcome "unknown", and the Slack message, which said
// "Approved by …", is updated to say that toolgate cannot tell whether the
// call ran. The defaults announced nothing after the approval, so the
// approver never heard it.
func TestDefaultsAnnounceUnknownOutcome(t *testing.T) {
	rc := startHookReceiver(t, 0)
	si := startSlackStandIn(t)
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	cfg := gatewayConfig(filepath.Join(dir, "toolgate.db"), upstreamServer(record)) + `
approvals:
  lease: 1s
  sweep_interval: 250ms
notify:
  poll: 100ms
  backoff: 100ms
  channels:
    - name: hook
      type: webhook
      url_env: HOOK_URL
      secret_env: HOOK_SECRET
    - name: slack
      type: slack
      token_env: SLACK_BOT_TOKEN
      channel: C0OPS
      api_url: ` + q(si.URL) + `
policy:
  default: deny
  rules:
    - name: slow needs approval
      server: t
      tools: [slow]
      effect: approve
      approval: { timeout: 1m }
`
	env := map[string]string{"HOOK_URL": rc.URL, "HOOK_SECRET": hookSecret, "SLACK_BOT_TOKEN": slackToken}
	first := startGateway(t, cfg, env)
	cs := first.connect(t, nil, nil)
	const args = `{"n":"unknown"}`
	ch := callAsync(t.Context(), cs, toolCall("t__slow", args))
	p := waitPending(t, first.Admin, 1)[0]
	si.waitCall(t, "chat.postMessage", p.ID)
	out := mustCLI(t, first.Admin, "approve", p.ID)
	if !strings.Contains(out, "; the call runs when its holder re-checks it against the policy in force and its approval quorum, if its caller is still waiting") {
		t.Errorf("approve printed %q, want that the call runs when its holder re-checks it, if its caller is still waiting", out)
	}
	waitRecord(t, record, "slow started "+args)
	si.waitCall(t, "chat.update", p.ID, "Approved by")
	first.kill(t)
	if r := await(t, ch); r.err == nil {
		t.Fatalf("the call returned %v after its gateway was killed, want a transport error", text(r.res))
	}

	second := startGateway(t, cfg, env)
	rc.waitEvent(t, p.ID, "dispatched", "unknown")
	si.waitCall(t, "chat.update", p.ID, "outcome unknown (the instance died), it may have run")
	if a := fetchApproval(t, second.Admin, p.ID); a.State != "consumed" || a.DispatchOutcome != "unknown" {
		t.Errorf("approval %s: state %s, outcome %q; want consumed, unknown", p.ID, a.State, a.DispatchOutcome)
	}
}
