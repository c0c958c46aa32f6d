package gate

import (
	"context"
	"encoding/json"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
)

// A Recorder keeps the audit trail of calls that leave no event in the
// store's event log: those the gate allowed or refused without an approval
// request, and monitor-mode verdicts (package audit implements it).
// Decided is called on the call's path and must not block or fail the
// call: it only queues.
type Recorder interface {
	Decided(ctx context.Context, d Decided)
}

// Decided is one call decided by the gate, for the audit trail.
type Decided struct {
	At        time.Time
	Principal approval.Principal
	// Kind, Server and Tool are Call's (Tool is the tool name, resource
	// URI or prompt name).
	Kind, Server, Tool string
	// Arguments are the raw bytes the agent sent. A Recorder must not keep
	// them: only their hash and redacted display copy (Redaction).
	Arguments json.RawMessage
	// Allowed: dispatched at once; otherwise refused with Reason, the text
	// the agent got.
	Allowed bool
	Reason  string
	// Code is the refusal's reason code (Admission.Code), "" when it has
	// none.
	Code string
	// Rule is the deciding policy rule; "" when the call was refused
	// before the policy decided (a session's exclusion or revocation, an
	// evaluation error).
	Rule string
	// PolicyRevision is the revision of the policy that decided ("" when
	// unknown).
	PolicyRevision string
	// Monitor is what monitor mode kept from happening (zero when nothing).
	Monitor policy.Monitor
	// Grant is the id of the remembered grant that allowed the call in
	// place of an approval ("" when none; the grant's use is an event too).
	Grant string
	// ApprovalID is set when the call went through an approval request
	// (whose own events are in the event log): the record is then only
	// there for its Monitor verdict.
	ApprovalID approval.ID
}

// record hands the decision of c to the Recorder, if any: always for a call
// decided without an approval request, and for one with a request only when
// monitor mode had a verdict. dec is nil when no policy decision was taken.
func (g *Gate) record(ctx context.Context, c Call, dec *policy.Decision, adm Admission) {
	r := g.opts.Recorder
	if r == nil {
		return
	}
	d := Decided{Principal: c.Principal, Kind: c.Kind, Server: c.Server, Tool: c.Tool, Arguments: c.Arguments,
		Allowed: adm.Allowed, Grant: adm.Grant, ApprovalID: adm.ApprovalID}
	if !adm.Allowed {
		d.Reason, d.Code = adm.Message, adm.Code
	}
	if dec != nil {
		d.Rule, d.PolicyRevision, d.Monitor = dec.Rule, dec.Revision, dec.Monitor
	}
	if d.ApprovalID != "" && d.Monitor.Verdict == "" {
		return
	}
	d.At = g.now()
	r.Decided(ctx, d)
}
