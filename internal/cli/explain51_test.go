package cli

import (
	"bytes"
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
