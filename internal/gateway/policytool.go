package gateway

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/session"
)

// PolicyToolName is the built-in MCP tool through which an agent session
// asks, in band, to change its own policy (issue 6). "toolgate" is a
// reserved server name, so no upstream tool can have this name. The tool
// only asks: deciding is never an MCP tool.
const PolicyToolName = "toolgate__request_policy_change"

// A PolicyRequester handles a session's request to change its own policy.
// *gate.Gate implements it.
type PolicyRequester interface {
	RequestSessionPolicy(ctx context.Context, actor approval.Principal, id session.ID, ch session.Change) (gate.PolicyResult, error)
}

// policyTool is the definition of PolicyToolName.
func policyTool() *mcp.Tool {
	return &mcp.Tool{
		Name: PolicyToolName,
		Description: "Ask to change this session's own tool policy. A change that only narrows applies at once; " +
			"one that widens needs a human approver: the answer is approval_required with an approval id, and " +
			"sending the identical request again after approval applies it once. Nothing outside the session's " +
			"ceiling (its parent's policy, the deployment's tools) can be granted.",
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"tools": map[string]any{
					"type":        "array",
					"items":       map[string]any{"type": "string"},
					"description": `The complete new tool set: refs "<server>" or "<server>__<tool>". Omit to keep the tools as they are.`,
				},
				"require_approval": map[string]any{
					"type":        "object",
					"description": "Per server: true (every tool needs approval), false (none) or a list of tool names. Servers not listed keep theirs.",
				},
			},
			"additionalProperties": false,
		},
	}
}

// policyToolOn reports whether p sees and may call the built-in tool: an
// agent session, when Options.PolicyRequests is set.
func (g *Gateway) policyToolOn(p approval.Principal) bool {
	return g.opts.PolicyRequests != nil && p.SessionID != ""
}

// callPolicyTool runs the built-in tool for p. It is not gated by the
// deployment policy: RequestSessionPolicy applies the session rules.
func (g *Gateway) callPolicyTool(ctx context.Context, p approval.Principal, args json.RawMessage) *mcp.CallToolResult {
	var ch session.Change
	if len(args) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(args)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ch); err != nil {
			return errorResult("invalid arguments: " + err.Error())
		}
	}
	res, err := g.opts.PolicyRequests.RequestSessionPolicy(ctx, p, session.ID(p.SessionID), ch)
	if err != nil {
		g.log.InfoContext(ctx, "session policy request refused", "principal", p.ID, "err", err)
		return errorResult("refused: " + strings.TrimPrefix(strings.TrimPrefix(err.Error(), "session: "), "gate: "))
	}
	ans := res.Answer()
	text, err := json.Marshal(ans)
	if err != nil {
		return errorResult("internal error")
	}
	if res.Changed {
		g.SessionsChanged()
	}
	return &mcp.CallToolResult{IsError: res.Status != gate.PolicyApplied, Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}}
}
