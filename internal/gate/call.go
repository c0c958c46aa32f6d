package gate

import (
	"context"
	"encoding/json"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/session"
)

// Call is one agent request as the gate sees it: who asks, what it uses
// (a tool, a resource or a prompt, by its real server and name), and the
// exact argument bytes that will be sent upstream.
type Call struct {
	Principal approval.Principal
	// Kind is approval.KindToolCall (or ""), approval.KindResourceRead or
	// approval.KindPromptGet; an approval request records it.
	Kind   string
	Server string
	// Tool is the real tool name, resource URI or prompt name, after Kind.
	Tool string
	// Arguments are the raw JSON bytes the agent sent; the gateway dispatches
	// exactly these bytes, and the gate hashes them.
	Arguments json.RawMessage
	// ToolDigest is the digest of the tool's (or prompt's) current
	// definition (see the gateway catalog); an approval is bound to it.
	// Resources have none ("").
	ToolDigest string
	// KeepAlive, when not nil, is called once when the call starts to be
	// held and then every keep-alive interval while it is held, with a
	// message for the caller that names the approval id (and its inbox
	// link when Options.PublicURL is set). The gateway sets it only when
	// the caller sent a progress token, and sends notifications/progress
	// from it.
	KeepAlive func(ctx context.Context, message string)
	// Outgoing, when not nil, returns the exact bytes the gateway will send
	// upstream if the call is admitted through an approval. The gate calls it
	// once, immediately before consuming the approval, hashes its result
	// against the approved hash, and returns it in Admission.Arguments. nil
	// means Arguments are sent.
	Outgoing func() json.RawMessage

	// How a caller that cannot be held for long waits (issue 11). The zero
	// values hold the call until it is decided or its request expires.

	// MaxHold, when > 0, bounds how long the call is held waiting for a
	// decision. When it passes first, the request stays pending (the lease
	// is released, so the identical re-send takes it over) and the
	// Admission is Pending.
	MaxHold time.Duration
	// Defer records the request and returns at once with a Pending
	// Admission instead of holding: the caller comes back for the decision
	// (an MCP multi round-trip request; Resume).
	Defer bool
	// Task makes the request an MCP task: the gate records a task with the
	// call's principal and sealed arguments next to the request, so that
	// any instance can run the call once approved, and calls OnHold when
	// the request is durably recorded and held.
	Task bool
	// OnHold, when not nil, is called once, with the request, when the call
	// starts to be held (after the request and its task are recorded, or
	// after an identical call took an abandoned request over).
	OnHold func(approval.Request)
	// Resume names the approval the call continues (a re-send naming it in
	// _meta["toolgate/approval"], a multi round-trip request's verified
	// requestState, or a task run again by another instance). The request
	// must be this call's (principal, server, tool, argument hash): then a
	// consumed one answers with its recorded result (Admission.Replay)
	// instead of running again, an open one is waited on, a settled one
	// answers with its outcome. It is never inferred from equal arguments.
	Resume approval.ID
	// Prior is the hand-off [Gate.AdmitUnlessHeld] returned for this same
	// call (principal, kind, server, tool and argument bytes); Admit uses
	// the policy decision it carries instead of evaluating again while the
	// policy revision it was taken under is in force. A Prior of another
	// call, or none, means a fresh evaluation.
	Prior *HandOff

	// admitted is the policy decision taken at admission, which consume
	// reuses while the policy revision has not moved.
	admitted *policy.Decision
	// consumeToken is the token every consume of this call writes with the
	// request (approval.Request.ConsumeToken), set once when the call
	// starts to be held (startWait), so that the consume a decision runs
	// for it (Gate.ReviewIf) and its own carry the same one; "" makes
	// each consume draw its own (consumeCheck).
	consumeToken string
	// hold is the lease mark of this call's hold (leases.hold), set when
	// the call is held (on a request it created or took over); 0 when it
	// holds none. Releasing the hold ends only this mark (releaseHold).
	hold holdMark
}

// Admission is the gate's answer to a Call. When Allowed is false the call
// must not be dispatched; Message is the text of the isError result the agent
// gets, and Meta holds _meta entries for it (may be nil).
type Admission struct {
	Allowed bool
	Message string
	// Code names the kind of a refusal whose reason has one (e.g.
	// CodeQuorumUnreachable); "" otherwise. The audit trail records it.
	Code       string
	Meta       map[string]any
	ApprovalID approval.ID // set when the call runs (or was refused) through an approval
	// Timeout is true when the refusal is a hold that timed out.
	Timeout bool
	// Arguments, when not nil, are the bytes to dispatch: what Call.Outgoing
	// returned and the gate checked against the approval.
	Arguments json.RawMessage
	// Grant is the id of the grant that allowed the call in place of an
	// approval ("" when none did); its use is recorded in the store.
	Grant string
	// Monitor is what the policy's monitor mode kept from happening: a
	// would_deny or would_hold verdict and the rule, zero when nothing (the
	// audit trail records it).
	Monitor policy.Monitor
	// Pending is true when the call waits for a decision on Held (MaxHold
	// passed, or Defer): nothing ran, and the request stays open.
	Pending bool
	// Held is the request a Pending call waits on, or the one an admitted
	// or refused call was decided through; nil when there is none (a call
	// the policy allowed or denied at once). A copy: the gate does not
	// change it after the Admission is returned. (A pointer, not a value:
	// the request is 584 bytes an allowed call never uses; issue 13.)
	Held *approval.Request
	// Replay is the recorded result of the approval a Resume call named,
	// which was consumed already: the caller gets it instead of a second
	// run. nil otherwise.
	Replay *Recorded

	finish func(ctx context.Context, o approval.Outcome, d Recorded)
	held   *heldCall // set by hold and holdTaken: Admit waits for the decision
}

// heldCopy returns a copy of r for Admission.Held.
func heldCopy(r approval.Request) *approval.Request { return &r }

// Recorded is what dispatching an admitted call gave: its result, or the
// JSON-RPC error object it failed with. It is what the result ledger keeps
// of a consumed approval.
type Recorded struct {
	// Result is the result as JSON (a CallToolResult for a tool call); nil
	// when the dispatch failed.
	Result json.RawMessage
	// Error is the JSON-RPC error object; nil when there is a Result.
	Error json.RawMessage
	// Truncated is set when the ledger kept a shortened stand-in of a
	// result larger than it keeps (Options.ResultMaxBytes).
	Truncated bool
}

// Finish records the dispatch outcome of an admitted call. It is a no-op for
// calls that were allowed without an approval. Call it (or FinishWith)
// exactly once after the upstream answered (or failed).
func (a Admission) Finish(ctx context.Context, o approval.Outcome) {
	a.FinishWith(ctx, o, Recorded{})
}

// FinishWith is Finish that also records what the dispatch gave in the
// result ledger, for a call admitted through an approval, so that a
// re-send naming the approval or its task gets it back (bounded by
// Options.ResultMaxBytes, for Options.ResultTTL).
func (a Admission) FinishWith(ctx context.Context, o approval.Outcome, d Recorded) {
	if a.finish != nil {
		a.finish(ctx, o, d)
	}
}

// FinishOnce is FinishWith for the Admission a points to, at most once:
// a later FinishOnce (or FinishWith) on it records nothing. A caller that
// may have to record an outcome after a failure it cannot tell the place
// of (a panic during the dispatch or its record) calls it again without
// recording a second outcome.
func (a *Admission) FinishOnce(ctx context.Context, o approval.Outcome, d Recorded) {
	f := a.finish
	a.finish = nil
	if f != nil {
		f(ctx, o, d)
	}
}

// setPolicyName puts what c uses into pc: its kind and its name in the
// field of that kind.
func (c Call) setPolicyName(pc *policy.Call) {
	pc.Tool = ""
	switch c.Kind {
	case approval.KindResourceRead:
		pc.Kind, pc.Resource = policy.KindResource, c.Tool
	case approval.KindPromptGet:
		pc.Kind, pc.Prompt = policy.KindPrompt, c.Tool
	case "", approval.KindToolCall:
		pc.Kind, pc.Tool = policy.KindTool, c.Tool
	default:
		pc.Kind = policy.Kind(c.Kind) // not valid: Evaluate refuses it
	}
}

// item is the session's view of c.
func (c Call) item() session.Item {
	switch c.Kind {
	case approval.KindResourceRead:
		return session.Item{Kind: session.KindResource, Server: c.Server, Name: c.Tool}
	case approval.KindPromptGet:
		return session.Item{Kind: session.KindPrompt, Server: c.Server, Name: c.Tool}
	}
	return session.Item{Kind: session.KindTool, Server: c.Server, Name: c.Tool}
}

// label names what c uses for people, as policy.Call.Label does.
func (c Call) label() string {
	pc := policy.Call{Server: c.Server}
	c.setPolicyName(&pc)
	return pc.Label()
}

// method is the MCP method of c, for spans.
func (c Call) method() string {
	switch c.Kind {
	case approval.KindResourceRead:
		return "resources/read"
	case approval.KindPromptGet:
		return "prompts/get"
	}
	return "tools/call"
}

// spanName is the name of c's span: method and exposed-style name, but
// only the server for a resource (URIs would make names unbounded).
func (c Call) spanName() string {
	if c.Kind == approval.KindResourceRead {
		return c.method() + " " + c.Server
	}
	return c.method() + " " + c.Server + "__" + c.Tool
}

// nameAttribute is the span attribute that holds c's name.
func (c Call) nameAttribute() string {
	switch c.Kind {
	case approval.KindResourceRead:
		return "mcp.resource.uri"
	case approval.KindPromptGet:
		return "gen_ai.prompt.name"
	}
	return "gen_ai.tool.name"
}

// sameKind reports whether request kind k is c's (the empty kind is a tool
// call).
func (c Call) sameKind(k string) bool {
	norm := func(k string) string {
		if k == "" {
			return approval.KindToolCall
		}
		return k
	}
	return norm(k) == norm(c.Kind)
}
