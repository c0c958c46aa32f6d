package cli_test

import (
	"strings"
	"testing"
)

// TestRepeatedReviewSaysNothingWasRecorded checks that a reviewer repeating
// a verdict is told that nothing new was recorded and which reason stands,
// not "deny recorded" (real gate and SQLite store behind the admin API).
func TestRepeatedReviewSaysNothingWasRecorded(t *testing.T) {
	e := newGrantEnv(t)
	id := string(e.call(t, `{"amount":10}`).ApprovalID)
	if code, out, errs := e.run(t, approvalsCmd, "deny", id, "--reason", "first reason"); code != 0 || out != id+": deny recorded; now denied (decided by alice)\n" {
		t.Fatalf("first deny: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs := e.run(t, approvalsCmd, "deny", id, "--reason", "second reason")
	if code != 0 || !strings.HasPrefix(out, id+": deny not recorded: you had given this verdict already (at ") ||
		!strings.Contains(out, `reason "first reason"`) || !strings.HasSuffix(out, "; it is denied (decided by alice)\n") ||
		strings.Contains(out, "second reason") || strings.Contains(out, "deny recorded") {
		t.Errorf("repeated deny: exit %d\n%s%s", code, out, errs)
	}
	if code, out, _ := e.run(t, approvalsCmd, "deny", id, "--reason", "third", "--json"); code != 0 || !strings.Contains(out, `"duplicate":true`) || !strings.Contains(out, `"reason":"first reason"`) {
		t.Errorf("repeated deny --json: exit %d\n%s", code, out)
	}
	if code, out, _ := e.run(t, approvalsCmd, "show", id); code != 0 || strings.Contains(out, "second reason") || !strings.Contains(out, "first reason") {
		t.Errorf("show after the repeated deny: exit %d\n%s", code, out)
	}

	id2 := string(e.call(t, `{"amount":11}`).ApprovalID)
	if code, out, errs := e.run(t, approvalsCmd, "approve", id2); code != 0 || out != id2+": approve recorded; now approved (1 of 1, decided by alice); the call runs when its caller re-sends it, if the re-check against the policy in force admits it; approvals show says what became of it\n" {
		t.Fatalf("first approve: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = e.run(t, approvalsCmd, "approve", id2, "--grant", "1h")
	if want := id2 + ": approve not recorded: you had given this verdict already; the grant terms were not recorded either; it is approved (decided by alice)\n"; code != 0 || out != want {
		t.Errorf("repeated approve with a grant: exit %d, stdout %q, stderr %q; want %q", code, out, errs, want)
	}

	// The caller re-sends and the call is dispatched: approving again says
	// so in words, not "state consumed".
	if adm := e.call(t, `{"amount":11}`); adm.ApprovalID == "" {
		t.Fatalf("re-send after the approval: %+v", adm)
	}
	code, out, errs = e.run(t, approvalsCmd, "approve", id2)
	if want := id2 + ": approve not recorded: you had given this verdict already; it was approved (decided by alice) and dispatched; no outcome recorded yet\n"; code != 0 || out != want {
		t.Errorf("approve of a dispatched call: exit %d, stdout %q, stderr %q; want %q", code, out, errs, want)
	}
}
