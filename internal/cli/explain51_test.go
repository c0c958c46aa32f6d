package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"toolgate/internal/policy"
)

// TestExplainSaysAGrantComesBeforeTheQuorum (grants51): the gate reads the
// caller's grants before its quorum check, so a call refused as
// quorum_unreachable still runs under a standing grant; explain says so
// when the call takes grants, and not when grants are forbidden for it.
func TestExplainSaysAGrantComesBeforeTheQuorum(t *testing.T) {
	const unless = "unless a standing grant of the caller admits it: the gate checks grants before the quorum"
	for _, grants := range []bool{true, false} {
		x := policy.Explanation{Effect: policy.Approve, Rule: "three from ops",
			Approval: &policy.ApprovalText{Approvals: 3, Grants: grants},
			Quorum:   &policy.QuorumCheck{Known: true, Refused: true, Code: "quorum_unreachable", Message: "denied: rule needs 3 approvals"}}
		var out bytes.Buffer
		printExplanation(&out, x)
		if got := strings.Contains(out.String(), unless); got != grants {
			t.Errorf("grants %v: the output says %q: %v, want %v\n%s", grants, unless, got, grants, out.String())
		}
		if !strings.Contains(out.String(), "gate:        refuses it at once (code quorum_unreachable); the agent is told: denied: rule needs 3 approvals") {
			t.Errorf("grants %v: no refusal line:\n%s", grants, out.String())
		}
	}
}

// TestExplainDevCountsTheDevApprover (grants51): `policy explain --config
// --dev` counts serve --dev's approver (dev-approver, role admin) in the
// quorum check, as serve --dev does: "finance only" needs 2 approvals and
// the config has one approver (alice), so without --dev the gate refuses
// the call and with it (alice and dev-approver) holds it. --dev without
// --config is a usage error. On a2628f8c --dev was an unknown flag.
func TestExplainDevCountsTheDevApprover(t *testing.T) {
	dir := writeFiles(t, map[string]string{"toolgate.yaml": testConfig})
	run := func(extra ...string) (int, string) {
		t.Helper()
		var out, errb bytes.Buffer
		args := append([]string{"--config", filepath.Join(dir, "toolgate.yaml"), "--server", "pay", "--tool", "refund", "--principal", "desktop"}, extra...)
		code := RunExplain(t.Context(), args, &out, &errb, nil)
		return code, out.String() + errb.String()
	}
	if code, out := run(); code != ExitOK || !strings.Contains(out, "refuses it at once (code quorum_unreachable)") {
		t.Errorf("without --dev: exit %d, want the quorum refusal:\n%s", code, out)
	}
	if code, out := run("--dev"); code != ExitOK || !strings.Contains(out, "quorum:      reachable") || strings.Contains(out, "refuses it at once") {
		t.Errorf("with --dev: exit %d, want the quorum reachable:\n%s", code, out)
	}
	var out, errb bytes.Buffer
	if code := RunExplain(t.Context(), []string{"--addr", "http://127.0.0.1:9", "--token", "x", "--dev", "--server", "pay", "--tool", "refund"}, &out, &errb, nil); code != ExitUsage {
		t.Errorf("--dev with --addr: exit %d, want 2\n%s", code, errb.String())
	}
}
