package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// featureHooks lets a test steer an in-process feature server.
type featureHooks struct {
	// inFlight receives the tag of each ask call once it started.
	inFlight chan string
	// elicited, when set, receives the error of each ask call's
	// elicitation (nil when it was answered); the elicitation then waits
	// for its answer even when the call is cancelled.
	elicited chan error
}

// newFeatureServer returns an upstream that uses everything issue 10
// passes through: prompts (greet), resources (test://static, test://<tag>,
// template test://item/{id}), completion, subscriptions, logging, and the
// tools ask (log + elicitation), sample (sampling) and roots (roots/list).
// tag names it in what it returns, so a test can tell servers apart.
func newFeatureServer(tag string, h *featureHooks) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "feature-" + tag, Version: "1"}, &mcp.ServerOptions{
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{tag + ":" + req.Params.Ref.Type + ":" + req.Params.Ref.Name + req.Params.Ref.URI}}}, nil
		},
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "name", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: tag + " greets " + req.Params.Arguments["name"]}}}}, nil
		})
	read := func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: tag + " " + req.Params.URI}}}, nil
	}
	s.AddResource(&mcp.Resource{URI: "test://static", Name: "static"}, read)
	s.AddResource(&mcp.Resource{URI: "test://" + tag, Name: tag}, read)
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://item/{id}", Name: "item"}, read)

	text := func(t string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: t}}}
	}
	var args struct {
		Tag   string
		Level string
	}
	s.AddTool(&mcp.Tool{Name: "ask", Description: "logs, then elicits an answer", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			a := args
			_ = json.Unmarshal(req.Params.Arguments, &a)
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "log-" + a.Tag})
			if h != nil {
				h.inFlight <- a.Tag
			}
			ectx := ctx
			if h != nil && h.elicited != nil {
				// The test watches how the question ends: the gateway's
				// answer, not the call's cancellation, which may reach
				// this server first (both are on their way when an agent
				// cancels) and would end the wait without the answer.
				ectx = context.WithoutCancel(ctx)
			}
			res, err := req.Session.Elicit(ectx, &mcp.ElicitParams{
				Message:         "question-" + a.Tag,
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}},
			})
			if h != nil && h.elicited != nil {
				h.elicited <- err
			}
			if err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "elicitation failed: " + err.Error()}}}, nil
			}
			return text(fmt.Sprintf("%s %v", res.Action, res.Content["answer"])), nil
		})
	s.AddTool(&mcp.Tool{Name: "log", Description: "logs at debug and at error", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			a := args
			_ = json.Unmarshal(req.Params.Arguments, &a)
			for _, l := range []mcp.LoggingLevel{"debug", "error"} {
				_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: l, Data: string(l) + "-" + a.Tag})
			}
			return text("logged"), nil
		})
	s.AddTool(&mcp.Tool{Name: "sample", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			//lint:ignore SA1019 a test of sampling through the gateway.
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
			if err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "sampling failed: " + err.Error()}}}, nil
			}
			return text(res.Content.(*mcp.TextContent).Text), nil
		})
	s.AddTool(&mcp.Tool{Name: "roots", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			//lint:ignore SA1019 a test of roots through the gateway.
			res, err := req.Session.ListRoots(ctx, nil)
			if err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "roots failed: " + err.Error()}}}, nil
			}
			var uris []string
			for _, r := range res.Roots {
				uris = append(uris, r.URI)
			}
			return text(strings.Join(uris, " ")), nil
		})
	s.AddTool(&mcp.Tool{Name: "caps", Description: "the client capabilities the session declared", InputSchema: objectSchema},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			c := req.Session.InitializeParams().Capabilities
			var have []string
			if c.RootsV2 != nil {
				have = append(have, "roots")
			}
			if c.Sampling != nil {
				have = append(have, "sampling")
			}
			if c.Elicitation != nil {
				have = append(have, "elicitation")
				if c.Elicitation.URL != nil {
					have = append(have, "elicitation.url")
				}
			}
			return text(strings.Join(have, " ")), nil
		})
	// roots_async asks for the roots on its own, not as part of the call
	// (the call returns at once); roots_async_result waits for the answer.
	var (
		asyncMu   sync.Mutex
		asyncDone = make(chan struct{})
		asyncOut  string
	)
	s.AddTool(&mcp.Tool{Name: "roots_async", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ss := req.Session
			go func() {
				// The call has returned: the question outlives it.
				res, err := ss.ListRoots(context.WithoutCancel(ctx), nil)
				asyncMu.Lock()
				defer asyncMu.Unlock()
				if err != nil {
					asyncOut = "roots failed: " + err.Error()
				} else {
					for _, r := range res.Roots {
						asyncOut += r.URI
					}
				}
				close(asyncDone)
			}()
			return text("asked"), nil
		})
	s.AddTool(&mcp.Tool{Name: "roots_async_result", InputSchema: objectSchema},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-asyncDone:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			asyncMu.Lock()
			defer asyncMu.Unlock()
			return text(asyncOut), nil
		})
	s.AddTool(&mcp.Tool{Name: "pid", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(fmt.Sprint(os.Getpid())), nil
		})
	return s
}

// featureStdio configures the test binary as a stdio feature server.
func featureStdio(name string) ServerConfig {
	return ServerConfig{Name: name, Command: os.Args[0], Args: []string{"-test.run=^$"}, Env: map[string]string{envUpstream: "stdio-features"}}
}

// agentRecord is what one agent client got from the gateway.
type agentRecord struct {
	mu           sync.Mutex
	elicitations []string
	logs         []string
	updated      []string
	// onElicit, when set, runs in the elicitation handler before it answers.
	onElicit func()
	// added is closed and replaced on every add; nil until first waited on.
	added chan struct{}
}

func (r *agentRecord) add(list *[]string, s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*list = append(*list, s)
	if r.added != nil {
		close(r.added)
		r.added = nil
	}
}

// waitLen returns list once it holds at least n entries, or what it holds
// after testWait. A notification sent before a call's result may reach the
// client's handler after CallTool has returned: the SDK handles them on
// separate goroutines.
func (r *agentRecord) waitLen(list *[]string, n int) []string {
	deadline := time.After(testWait)
	for {
		r.mu.Lock()
		if len(*list) >= n {
			defer r.mu.Unlock()
			return slices.Clone(*list)
		}
		if r.added == nil {
			r.added = make(chan struct{})
		}
		added := r.added
		r.mu.Unlock()
		select {
		case <-added:
		case <-deadline:
			return r.get(list)
		}
	}
}

func (r *agentRecord) get(list *[]string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(*list)
}

// capableClient returns client options for an agent named who that
// declares sampling, elicitation and roots (file:///<who>), and records
// what it gets in r. With plain set it declares none of them.
func capableClient(who string, r *agentRecord, plain bool) (*mcp.ClientOptions, func(*mcp.Client)) {
	opts := &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			r.add(&r.logs, fmt.Sprint(req.Params.Data))
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			r.add(&r.updated, req.Params.URI)
		},
	}
	if plain {
		opts.Capabilities = &mcp.ClientCapabilities{}
		return opts, func(*mcp.Client) {}
	}
	opts.ElicitationHandler = func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		r.add(&r.elicitations, req.Params.Message)
		if r.onElicit != nil {
			r.onElicit()
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "from-" + who}}, nil
	}
	opts.CreateMessageHandler = func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "sampled by " + who}}, nil
	}
	return opts, func(c *mcp.Client) {
		//lint:ignore SA1019 a test of roots through the gateway.
		c.AddRoots(&mcp.Root{URI: "file:///" + who})
	}
}

// connectAgent connects an agent with the given client options to the
// gateway at base as token's principal.
func connectAgent(t *testing.T, base, token string, opts *mcp.ClientOptions, setup func(*mcp.Client)) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, opts)
	if setup != nil {
		setup(c)
	}
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: httpClientWithToken(token)}, era2025)
	if err != nil {
		t.Fatalf("connect agent: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// httpClientWithToken is an HTTP client that sends token as a bearer token.
func httpClientWithToken(token string) *http.Client {
	return &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
}
