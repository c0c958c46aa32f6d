package gateway

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/mcpwire"
)

// privateCache is the cache hint of every list toolgate answers itself and
// of every resources/read it relays: lists differ per principal (policy,
// agent sessions) and reads are gated per principal, so a shared cache
// must not keep them (SEP-2549 cacheScope; ttlMs 0: stale at once).
var privateCache = mcp.Cacheable{CacheScope: "private"}

// markComplete returns res (a prompts/get or resources/read result relayed
// from an upstream) with resultType "complete", which a 2026-07-28 result
// must carry (SEP-2322). The SDK sets it only on results its own handlers
// return, and keeps the field unexported: it is set through the type's
// JSON form. On any failure res is returned as it was.
func markComplete[T any](res *T) *T {
	return markResultType(res, "complete")
}

// markResultType is markComplete with resultType rt ("input_required" for a
// relayed round of prompts/get, relay2026.go).
func markResultType[T any](res *T, rt string) *T {
	b, err := json.Marshal(res)
	if err != nil || len(b) < 2 || b[0] != '{' {
		return res
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(b, &fields) != nil {
		return res
	}
	q, err := json.Marshal(rt)
	if err != nil {
		return res
	}
	fields["resultType"] = q
	if b, err = json.Marshal(fields); err != nil {
		return res
	}
	out := new(T)
	if json.Unmarshal(b, out) != nil {
		return res
	}
	return out
}

// A RequestStater signs and verifies the requestState of multi round-trip
// rounds for calls waiting on an approval (*gate.Gate).
type RequestStater interface {
	// RequestState is a new single-use state for the next round on r.
	RequestState(r approval.Request) (string, error)
	// OpenRequestState verifies a state the caller sent back for c and
	// returns the approval it names.
	OpenRequestState(ctx context.Context, state string, c gate.Call) (approval.ID, error)
	// InboxLink is the approval's inbox page ("" without a public URL).
	InboxLink(id approval.ID) string
	// RelayState wraps an upstream's requestState (relay2026.go) for the
	// next round of c.
	RelayState(c gate.Call, upstream string) (string, error)
	// OpenRelayState verifies a wrapped state c's caller sent back and
	// returns the upstream's state (gate.ErrNotRelayState: not a relayed
	// round's state).
	OpenRelayState(ctx context.Context, state string, c gate.Call) (string, error)
}

// mrtrFor reports whether a held tools/call is answered with multi
// round-trip rounds (SEP-2322) instead of being held: a 2026-07-28
// request whose client declared URL-mode elicitation (the round shows the
// approval's inbox page to its user), on a gateway with a public URL. A
// client that declared Tasks is served by the Tasks front instead.
func (g *Gateway) mrtrFor(ctx context.Context, req *mcp.CallToolRequest) bool {
	if g.opts.MRTR == nil || !isModernRequest(ctx) || req.Params == nil {
		return false
	}
	raw, err := json.Marshal(req.Params.Meta[mcpwire.MetaClientCapabilities])
	if err != nil {
		return false
	}
	caps, err := mcpwire.ParseClientCapabilities(raw)
	// InboxLink is "" exactly when no public URL is configured.
	return err == nil && caps.ElicitationURL && g.opts.MRTR.InboxLink("") != ""
}

// inputRequired is one multi round-trip round of a call whose approval is
// pending: a URL elicitation pointing at the approval's inbox page, and a
// signed single-use requestState for the next round. The caller's answer
// to the elicitation is never taken as the approval: each round asks the
// store whether an approver decided.
func (g *Gateway) inputRequired(adm gate.Admission) (*mcp.CallToolResult, error) {
	if adm.Held == nil {
		// Only a held (Pending) call gets a round; without its request
		// there is nothing to bind the round to.
		return nil, errors.New("no approval request to wait on")
	}
	r := *adm.Held
	link := g.opts.MRTR.InboxLink(r.ID)
	if link == "" {
		return nil, errors.New("no public URL for the approval's inbox page")
	}
	st, err := g.opts.MRTR.RequestState(r)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{
			"toolgate-approval": &mcp.ElicitParams{
				Mode:          "url",
				URL:           link,
				ElicitationID: "toolgate-approval-" + string(r.ID) + "-" + rand.Text()[:8],
				Message: fmt.Sprintf("This call needs a person's approval (approval %s, expires %s). Open the page to follow it; an approver decides there. "+
					"Answering here does not approve it: the call runs when it is retried after an approver approved it.", r.ID, r.ExpiresAt.UTC().Format(time.RFC3339)),
			},
		},
		RequestState: st,
	}, nil
}
