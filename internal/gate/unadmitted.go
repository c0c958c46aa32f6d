package gate

import (
	"context"

	"toolgate/internal/policy"
)

// Unadmitted records on the audit trail (Options.Recorder) the call c,
// which was never admitted: its caller went away while it waited for an
// admission (the gateway's bound on admissions at once), so nothing was
// stored or run for it, and reason is the refusal it was answered. The
// record is a refused call's (type "refused", the redacted display copy
// and hash of its arguments, never their bytes), with the rule of the
// policy decision c.Prior carries, if any; a call with such a decision is
// also counted (the tool-call metric, with that decision's effect), as a
// refused hold is (attack31). It only queues, as Recorder does: it neither
// blocks nor fails.
func (g *Gate) Unadmitted(ctx context.Context, c *Call, reason string) {
	var dec *policy.Decision
	if h := c.Prior; h != nil && h.dec != nil && h.takenFor(*c) {
		d := *h.dec
		d.Decoded = nil
		dec = &d
		g.metrics.ToolCall(c.Server, string(d.Effect))
	}
	g.record(context.WithoutCancel(ctx), *c, dec, Admission{Message: reason})
}
