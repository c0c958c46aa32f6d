package gate

import (
	"context"
	"encoding/json"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
)

// Call is one tools/call as the gate sees it: who asks, which real
// (server, tool) pair, and the exact argument bytes that will be sent upstream.
type Call struct {
	Principal approval.Principal
	Server    string
	Tool      string
	// Arguments are the raw JSON bytes the agent sent; the gateway dispatches
	// exactly these bytes, and the gate hashes them.
	Arguments json.RawMessage
	// ToolDigest is the digest of the tool's current definition (see the
	// gateway catalog); an approval is bound to it.
	ToolDigest string
	// KeepAlive, when not nil, is called every keep-alive interval while the
	// call is held. The gateway sets it only when the caller sent a progress
	// token, and sends notifications/progress from it.
	KeepAlive func(ctx context.Context)
	// Outgoing, when not nil, returns the exact bytes the gateway will send
	// upstream if the call is admitted through an approval. The gate calls it
	// once, immediately before consuming the approval, hashes its result
	// against the approved hash, and returns it in Admission.Arguments. nil
	// means Arguments are sent.
	Outgoing func() json.RawMessage

	// admitted is the policy decision taken at admission, which consume
	// reuses while the policy revision has not moved.
	admitted *policy.Decision
}

// Admission is the gate's answer to a Call. When Allowed is false the call
// must not be dispatched; Message is the text of the isError result the agent
// gets, and Meta holds _meta entries for it (may be nil).
type Admission struct {
	Allowed    bool
	Message    string
	Meta       map[string]any
	ApprovalID approval.ID // set when the call runs (or was refused) through an approval
	// Timeout is true when the refusal is a hold that timed out.
	Timeout bool
	// Arguments, when not nil, are the bytes to dispatch: what Call.Outgoing
	// returned and the gate checked against the approval.
	Arguments json.RawMessage
	// Monitor is what the policy's monitor mode kept from happening: a
	// would_deny or would_hold verdict and the rule, zero when nothing (the
	// audit trail records it).
	Monitor policy.Monitor

	finish func(ctx context.Context, o approval.Outcome)
}

// Finish records the dispatch outcome of an admitted call. It is a no-op for
// calls that were allowed without an approval. Call it exactly once after the
// upstream answered (or failed).
func (a Admission) Finish(ctx context.Context, o approval.Outcome) {
	if a.finish != nil {
		a.finish(ctx, o)
	}
}
