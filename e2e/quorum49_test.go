package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestUnreachableQuorumRefusedAtOnce (quorum49): a call that needs three
// approvals from group ops (carol, dave, alice), made by agent-2 on
// behalf of alice, who may not review it, can never be approved: the Go
// SDK client gets an isError refusal at once that names the rule, the
// quorum and who may review, nothing is pending afterwards (REST and
// `toolgate approvals list`), the upstream never ran, and the gateway's
// log names the refusal without the arguments. The same call by agent-1
// (for nobody) is held as before: all three may review it.
func TestUnreachableQuorumRefusedAtOnce(t *testing.T) {
	g, record := startTeamGateway(t, `
policy:
  default: deny
  rules:
    - name: three from ops
      server: t
      tools: [echo_raw]
      effect: approve
      approval: { timeout: 10m, approvals: 3, approvers: ["group:ops"] }
`)
	const args = `{"secret_marker":"q49-7f3a"}`
	start := time.Now()
	// Refused at once, not held: a held call (10m timeout) would not be
	// answered within await's wait, and nothing is pending below.
	got := mustIsError(t, await(t, callAsync(t.Context(), g.connectAs(t, agent2Token), toolCall("t__echo_raw", args))))
	want := `denied: rule "three from ops" needs 3 approvals from group:ops; only 2 of its 3 configured approver(s) may review a request by agent-2 acting for alice`
	if !strings.HasPrefix(got, want) || !strings.Contains(got, "nothing was held or run") {
		t.Fatalf("the agent got %q, want it to start %q and say nothing was held", got, want)
	}
	if all := approvals(t, g.Admin, "all"); len(all) != 0 {
		t.Fatalf("requests after the refusal: %+v, want none", all)
	}
	if out := mustCLI(t, g.Admin, "list"); strings.Contains(out, "echo_raw") {
		t.Errorf("toolgate approvals list shows a request after the refusal:\n%s", out)
	}
	line := g.waitLog(t, "approval quorum unreachable", "three from ops")
	if strings.Contains(g.stderr.String(), "q49-7f3a") {
		t.Errorf("the gateway logged the call's arguments: %s", line)
	}
	if ran := readRecord(t, record); len(ran) != 0 {
		t.Errorf("upstream ran %q", ran)
	}
	elapsed(t, "unreachable quorum refused", start)

	// agent-1 acts for nobody: ops has its three reviewers, the call waits.
	held := callAsync(t.Context(), g.connect(t, nil, nil), toolCall("t__echo_raw", `{"n":1}`))
	if a := awaitPendingArgs(t, g.Admin, `{"n":1}`); a.RequiredApprovals != 3 {
		t.Errorf("agent-1's call is pending for %d approvals, want 3", a.RequiredApprovals)
	}
	if len(held) > 0 {
		t.Fatalf("agent-1's call returned while pending: %+v", <-held)
	}
}
