package cli_test

import (
	"strings"
	"testing"
)

// TestShowSaysAnApprovedCallHasNotRun (explain50): `approvals show` of an
// approved call that has not run yet says that it runs when its holder
// re-checks it against the policy in force and its approval quorum (which may still invalidate
// it); once the call was dispatched the line is gone (real gate and
// SQLite store behind the admin API). On 3eefbceb show said only
// "State: approved" and the decision.
func TestShowSaysAnApprovedCallHasNotRun(t *testing.T) {
	e := newGrantEnv(t)
	id := string(e.call(t, `{"amount":12}`).ApprovalID)
	if code, out, errs := e.run(t, approvalsCmd, "approve", id); code != 0 || !strings.Contains(out, "now approved (1 of 1, decided by alice)") {
		t.Fatalf("approve: exit %d\n%s%s", code, out, errs)
	}
	// The call is held in retry mode: it runs when re-sent (review50).
	const next = "Next:               not run yet: the call runs when its caller re-sends it and the re-check against the policy in force admits it"
	if code, out, errs := e.run(t, approvalsCmd, "show", id); code != 0 || !strings.Contains(out, next) {
		t.Errorf("show of the approved call: exit %d, want %q\n%s%s", code, next, out, errs)
	}
	if adm := e.call(t, `{"amount":12}`); adm.ApprovalID == "" || !adm.Allowed {
		t.Fatalf("re-send after the approval: %+v", adm)
	}
	if code, out, errs := e.run(t, approvalsCmd, "show", id); code != 0 || strings.Contains(out, "Next:") || !strings.Contains(out, "consumed") {
		t.Errorf("show of the dispatched call: exit %d\n%s%s", code, out, errs)
	}
}
