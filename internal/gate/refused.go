package gate

import "context"

// RecordRefused records in the audit trail (the Recorder, if any) call c,
// which the gateway refused before asking the gate, with reason, the text
// the agent got: a call of a tool of an upstream that is down, whose tools
// are not known, so there is nothing the policy could decide on. The
// record is a refusal with no rule ("refused before the policy decided").
// It only queues (Recorder.Decided), so it never blocks the call.
func (g *Gate) RecordRefused(ctx context.Context, c Call, reason string) {
	g.record(ctx, c, nil, Admission{Message: reason})
}
