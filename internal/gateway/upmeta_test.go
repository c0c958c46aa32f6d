package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
)

// connectModernAgent connects a 2026-07-28 agent (the Go SDK client, which
// tries server/discover first) to the gateway at base as alice.
func connectModernAgent(t *testing.T, base string) *mcp.ClientSession {
	t.Helper()
	return connectEra(t, base, aliceToken, nil, true)
}

// TestModernAgentRelaysTo2025Upstream: a 2026-07-28 agent's prompts/get,
// resources/read and completion/complete reach a 2025-only upstream (a
// stateful go-sdk HTTP handler), over HTTP and stdio. Their _meta carries
// the agent's SEP-2575 protocol keys; relayed as they came, the upstream
// took the request for a 2026-07-28 one and answered -32022 (on 9a1ba441).
func TestModernAgentRelaysTo2025Upstream(t *testing.T) {
	g := newGateway(t, []ServerConfig{{Name: "f", URL: httpUpstream(t, newFeatureServer("a", nil))}}, allowAll(), nil)
	base := serveHTTP(t, g, nil)
	cs := connectModernAgent(t, base)

	pr, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "f__greet", Arguments: map[string]string{"name": "bo"}})
	if err != nil {
		t.Errorf("HTTP prompts/get: %v", err)
	} else if got := pr.Messages[0].Content.(*mcp.TextContent).Text; got != "a greets bo" {
		t.Errorf("HTTP prompts/get = %q", got)
	}
	rr, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "test://a"})
	if err != nil {
		t.Errorf("HTTP resources/read: %v", err)
	} else if got := rr.Contents[0].Text; got != "a test://a" {
		t.Errorf("HTTP resources/read = %q", got)
	}
	cr, err := cs.Complete(t.Context(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "f__greet"}, Argument: mcp.CompleteParamsArgument{Name: "name"}})
	if err != nil {
		t.Errorf("HTTP completion/complete: %v", err)
	} else if got := cr.Completion.Values; len(got) != 1 || got[0] != "a:ref/prompt:greet" {
		t.Errorf("HTTP completion/complete = %q", got)
	}

	a := serveModernStdio(t, g)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`
	for i, c := range []struct{ method, params, want string }{
		{"prompts/get", `"name":"f__greet","arguments":{"name":"bo"}`, "a greets bo"},
		{"resources/read", `"uri":"test://a"`, "a test://a"},
		{"completion/complete", `"ref":{"type":"ref/prompt","name":"f__greet"},"argument":{"name":"name","value":""}`, "a:ref/prompt:greet"},
	} {
		a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s,%s}}`, i+1, c.method, c.params, meta))
		if line := a.response(i + 1); strings.Contains(line, `"error"`) || !strings.Contains(line, c.want) {
			t.Errorf("stdio %s answered %s", c.method, line)
		}
	}
}

// TestRelayedMetaKeepsOtherKeys: what a relayed request's upstream sees of
// the agent's _meta is all of it but the 2026-07-28 protocol keys, the
// progress token and "toolgate/approval": a vendor key arrives;
// protocolVersion, clientInfo, clientCapabilities and logLevel do not; a
// progress token does on prompts/get and resources/read, toolgate's own
// (TestRelayedMetaDropsApprovalRoutesProgress).
func TestRelayedMetaKeepsOtherKeys(t *testing.T) {
	keys := func(m mcp.Meta) string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return strings.Join(ks, " ")
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "meta-upstream", Version: "1"}, &mcp.ServerOptions{
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{keys(req.Params.Meta)}}}, nil
		},
	})
	s.AddPrompt(&mcp.Prompt{Name: "keys"}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: keys(req.Params.Meta)}}}}, nil
	})
	s.AddResource(&mcp.Resource{URI: "test://keys", Name: "keys"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: keys(req.Params.Meta)}}}, nil
	})
	g := newGateway(t, []ServerConfig{{Name: "m", URL: httpUpstream(t, s)}}, allowAll(), nil)
	a := serveModernStdio(t, g)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/logLevel":"debug","progressToken":"p1","example.com/trace":"x","toolgate/approval":"apr_x"}`
	for i, c := range []struct{ method, params, want string }{
		{"prompts/get", `"name":"m__keys"`, "example.com/trace progressToken"},
		{"resources/read", `"uri":"test://keys"`, "example.com/trace progressToken"},
		{"completion/complete", `"ref":{"type":"ref/prompt","name":"m__keys"},"argument":{"name":"x","value":""}`, "example.com/trace"},
	} {
		a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s,%s}}`, i+1, c.method, c.params, meta))
		if line := a.response(i + 1); !strings.Contains(line, `"`+c.want+`"`) {
			t.Errorf("%s: the upstream saw other _meta keys than %q: %s", c.method, c.want, line)
		}
	}
}

// TestRelayedMetaDropsApprovalRoutesProgress (branch mrtr42): a relayed
// prompts/get, resources/read or completion/complete never carries
// toolgate's own _meta["toolgate/approval"] to the upstream, nor the
// agent's progress token: the upstream gets a token of toolgate's, and
// the progress it sends under it reaches the agent under the agent's own
// token before the answer, for a 2025-11-25 and a 2026-07-28 stdio agent
// alike. On e3242174 the upstream saw "toolgate/approval" and the agent's
// "p1", and its progress under "p1" matched no route: the agent got none.
func TestRelayedMetaDropsApprovalRoutesProgress(t *testing.T) {
	seen := func(ctx context.Context, ss *mcp.ServerSession, m mcp.Meta) string {
		tok := m["progressToken"]
		if tok != nil {
			_ = ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Message: "upstream-progress"})
		}
		_, approvalKey := m["toolgate/approval"]
		return fmt.Sprintf("approval=%v agent-token=%v", approvalKey, tok == "p1")
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "meta-upstream", Version: "1"}, &mcp.ServerOptions{
		CompletionHandler: func(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{seen(ctx, req.Session, req.Params.Meta)}}}, nil
		},
	})
	s.AddPrompt(&mcp.Prompt{Name: "keys"}, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: seen(ctx, req.Session, req.Params.Meta)}}}}, nil
	})
	s.AddResource(&mcp.Resource{URI: "test://keys", Name: "keys"}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: seen(ctx, req.Session, req.Params.Meta)}}}, nil
	})
	g := newGateway(t, []ServerConfig{{Name: "m", URL: httpUpstream(t, s)}}, allowAll(), nil)
	const want = "approval=false agent-token=false"
	for _, era := range []struct {
		name  string
		agent func() *rawAgent
		meta  string
	}{
		{"2025-11-25", func() *rawAgent { return serveRawStdio(t, g, approval.Principal{ID: "desktop", Kind: "agent"}) }, ""},
		{"2026-07-28", func() *rawAgent { return serveModernStdio(t, g) },
			`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},`},
	} {
		a := era.agent()
		meta := `"_meta":{` + era.meta + `"progressToken":"p1","toolgate/approval":"apr_x"}`
		for i, c := range []struct {
			method, params string
			progress       int // notifications relayed
		}{
			{"prompts/get", `"name":"m__keys"`, 1},
			{"resources/read", `"uri":"test://keys"`, 1},
			// The SDK gives completion no progress token to route.
			{"completion/complete", `"ref":{"type":"ref/prompt","name":"m__keys"},"argument":{"name":"x","value":""}`, 0},
		} {
			a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s,%s}}`, i+1, c.method, c.params, meta))
			progress := 0
			var line string
			for {
				l, err := a.out.ReadString('\n')
				if err != nil {
					t.Fatalf("%s %s: read: %v", era.name, c.method, err)
				}
				var m struct {
					ID     json.RawMessage
					Method string
					Params struct {
						ProgressToken any
						Message       string
					}
				}
				if json.Unmarshal([]byte(l), &m) != nil {
					continue
				}
				if m.Method == "notifications/progress" && m.Params.ProgressToken == "p1" && m.Params.Message == "upstream-progress" {
					progress++
				}
				if string(m.ID) == fmt.Sprint(i+1) {
					line = l
					break
				}
			}
			if !strings.Contains(line, want) {
				t.Errorf("%s %s: the upstream saw toolgate's approval key or the agent's progress token: %s", era.name, c.method, line)
			}
			if progress != c.progress {
				t.Errorf("%s %s: the agent got %d of the upstream's progress notifications under its token before the answer, want %d", era.name, c.method, progress, c.progress)
			}
		}
	}
}
