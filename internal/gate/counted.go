package gate

import (
	"strings"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/session"
	"toolgate/internal/telemetry"
)

// countedEffect is the effect label toolgate_tool_calls_total counts a
// call under: what decided it. A call a grant allowed in place of an
// approval is "grant" (telemetry.EffectGrant), whatever asked for the
// approval; a call the policy allows but its session's require_approval
// sends to a human is "approve"; otherwise the policy's effect.
func countedEffect(c Call, chain session.Chain, dec policy.Decision, adm Admission) string {
	switch {
	case adm.Grant != "":
		return telemetry.EffectGrant
	case dec.Effect == policy.Allow && chain != nil && chain.RequiresApprovalItem(c.item()):
		return string(policy.Approve)
	}
	return string(dec.Effect)
}

// cancelledMessage is what a held call whose request was cancelled is
// answered: with the reason when it is one the caller can learn from
// ("cancelled: the session was revoked"), else just that it was cancelled.
func cancelledMessage(r approval.Request) string {
	if strings.HasPrefix(r.Reason, "cancelled: ") {
		return r.Reason + "; nothing was run"
	}
	return "cancelled; nothing was run"
}
