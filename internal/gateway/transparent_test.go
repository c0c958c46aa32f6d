package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
)

// recordingGate admits everything and records what it was asked.
type recordingGate struct {
	mu    sync.Mutex
	calls []gate.Call
	deny  func(c gate.Call) string // a refusal message, or ""
}

func (r *recordingGate) Admit(_ context.Context, c gate.Call) gate.Admission {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	deny := r.deny
	r.mu.Unlock()
	if deny != nil {
		if msg := deny(c); msg != "" {
			return gate.Admission{Message: msg}
		}
	}
	return gate.Admission{Allowed: true}
}

func (r *recordingGate) last() gate.Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[len(r.calls)-1]
}

func wireCode(err error) int64 {
	var w *jsonrpc.Error
	if errors.As(err, &w) {
		return w.Code
	}
	return 0
}

func TestResourcesAndPromptsPassThrough(t *testing.T) {
	gk := &recordingGate{}
	g := newGateway(t, []ServerConfig{
		{Name: "a", URL: httpUpstream(t, newFeatureServer("a", nil))},
		{Name: "b", URL: httpUpstream(t, newFeatureServer("b", nil))},
	}, gk, &Options{ListPageSize: 2})
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)
	ctx := t.Context()

	// resources/list follows pagination (pages of 2); test://static is
	// claimed by both servers, so it is listed namespaced for each.
	var uris []string
	for r, err := range cs.Resources(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		uris = append(uris, r.URI)
	}
	want := []string{"test://a", "test://b", "toolgate://a/test://static", "toolgate://b/test://static"}
	if diff := cmp.Diff(want, uris); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	var tmpls []string
	for tp, err := range cs.ResourceTemplates(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		tmpls = append(tmpls, tp.URITemplate)
	}
	if diff := cmp.Diff([]string{"toolgate://a/test://item/{id}", "toolgate://b/test://item/{id}"}, tmpls); diff != "" {
		t.Errorf("templates (-want +got):\n%s", diff)
	}

	read := func(uri string) (string, string, error) {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			return "", "", err
		}
		return res.Contents[0].Text, res.Contents[0].URI, nil
	}
	if text, uri, err := read("test://b"); err != nil || text != "b test://b" || uri != "test://b" {
		t.Errorf("read test://b = %q %q %v", text, uri, err)
	}
	if c := gk.last(); c.Kind != approval.KindResourceRead || c.Server != "b" || c.Tool != "test://b" || string(c.Arguments) != `{"uri":"test://b"}` {
		t.Errorf("gate asked %+v, want a resource_read of b's test://b", c)
	}
	if text, uri, err := read("toolgate://a/test://static"); err != nil || text != "a test://static" || uri != "toolgate://a/test://static" {
		t.Errorf("read namespaced = %q %q %v, want a's content under the namespaced URI", text, uri, err)
	}
	if text, _, err := read("toolgate://b/test://item/7"); err != nil || text != "b test://item/7" {
		t.Errorf("read through b's namespaced template = %q %v", text, err)
	}
	if _, _, err := read("test://static"); wireCode(err) != jsonrpc.CodeInvalidParams || !strings.Contains(err.Error(), "toolgate://") {
		t.Errorf("read of a clashing URI = %v, want invalid params naming the namespaced form", err)
	}
	// SEP-2164 (MCP 2025-11-25): an unknown resource is invalid params,
	// "Resource not found", with the URI in the data.
	if _, _, err := read("test://nobody"); wireCode(err) != jsonrpc.CodeInvalidParams || !strings.Contains(err.Error(), "Resource not found") {
		t.Errorf("read of an unknown URI = %v, want resource not found (%d)", err, jsonrpc.CodeInvalidParams)
	}

	// Prompts are named like tools.
	var names []string
	for p, err := range cs.Prompts(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, p.Name)
	}
	if diff := cmp.Diff([]string{"a__greet", "b__greet"}, names); diff != "" {
		t.Errorf("prompts (-want +got):\n%s", diff)
	}
	pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "b__greet", Arguments: map[string]string{"name": "Ann"}})
	if err != nil || pr.Messages[0].Content.(*mcp.TextContent).Text != "b greets Ann" {
		t.Errorf("get b__greet = %+v %v", pr, err)
	}
	if c := gk.last(); c.Kind != approval.KindPromptGet || c.Server != "b" || c.Tool != "greet" || string(c.Arguments) != `{"name":"Ann"}` || !strings.HasPrefix(c.ToolDigest, "sha256:") {
		t.Errorf("gate asked %+v, want a prompt_get of b's greet with its arguments and digest", c)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet"}); wireCode(err) != jsonrpc.CodeInvalidParams {
		t.Errorf("get of an unknown prompt = %v, want invalid params", err)
	}

	// Completion is routed by its ref, with the real names.
	comp, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "a__greet"}, Argument: mcp.CompleteParamsArgument{Name: "name", Value: "A"}})
	if err != nil || !slices.Equal(comp.Completion.Values, []string{"a:ref/prompt:greet"}) {
		t.Errorf("complete a__greet = %+v %v", comp, err)
	}
	comp, err = cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "toolgate://b/test://item/{id}"}, Argument: mcp.CompleteParamsArgument{Name: "id", Value: "1"}})
	if err != nil || !slices.Equal(comp.Completion.Values, []string{"b:ref/resource:test://item/{id}"}) {
		t.Errorf("complete b's template = %+v %v", comp, err)
	}

	// A refusal of a read or get is a JSON-RPC error (there is no isError
	// result for these methods), and nothing reaches the upstream.
	gk.mu.Lock()
	gk.deny = func(c gate.Call) string { return "denied by policy rule \"no\"" }
	gk.mu.Unlock()
	if _, _, err := read("test://a"); wireCode(err) != CodeRefused || !strings.Contains(err.Error(), `rule "no"`) {
		t.Errorf("refused read = %v, want a JSON-RPC error %d with the reason", err, CodeRefused)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "a__greet"}); wireCode(err) != CodeRefused {
		t.Errorf("refused get = %v, want a JSON-RPC error %d", err, CodeRefused)
	}
}

// usableFunc is a SessionPolicy from a function.
type usableFunc func(kind, server, name string) bool

func (f usableFunc) Usable(context.Context, approval.Principal) (func(kind, server, name string) bool, error) {
	return f, nil
}

func TestListsShowOnlyWhatTheCallerMayUse(t *testing.T) {
	use := usableFunc(func(kind, server, name string) bool {
		hidden := (kind == approval.KindResourceRead && name == "test://secret") ||
			(kind == approval.KindPromptGet && name == "greet") ||
			(kind == approval.KindToolCall && name == "pid")
		return !hidden
	})
	srv := newFeatureServer("a", nil)
	srv.AddResource(&mcp.Resource{URI: "test://secret", Name: "secret"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return nil, errors.New("never read")
	})
	g := newGateway(t, []ServerConfig{{Name: "a", URL: httpUpstream(t, srv)}}, allowAll(), &Options{Sessions: use})
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)
	res, err := cs.ListResources(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Resources {
		if r.URI == "test://secret" {
			t.Error("a resource the caller may not read is listed")
		}
	}
	if len(res.Resources) != 2 {
		t.Errorf("listed %d resources, want 2 (test://a, test://static)", len(res.Resources))
	}
	prompts, err := cs.ListPrompts(t.Context(), nil)
	if err != nil || len(prompts.Prompts) != 0 {
		t.Errorf("prompts = %+v %v, want none (greet is not usable)", prompts, err)
	}
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		if tl.Name == "a__pid" {
			t.Error("a tool the caller may not use is listed")
		}
	}
	// Completion of a hidden prompt is as for an unknown one.
	if _, err := cs.Complete(t.Context(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "a__greet"}, Argument: mcp.CompleteParamsArgument{Name: "name"}}); wireCode(err) != jsonrpc.CodeInvalidParams {
		t.Errorf("complete of a hidden prompt = %v, want invalid params", err)
	}
}

// A featureUpstream is a way to configure a feature server
// (newFeatureServer) as the upstream "up".
type featureUpstream struct {
	name string
	cfg  func(t *testing.T) ServerConfig
}

// featureUpstreams are an HTTP upstream with one shared session, a stdio
// upstream (a process per agent) and an HTTP upstream with a session per
// agent.
func featureUpstreams() []featureUpstream {
	return []featureUpstream{
		{"http shared", func(t *testing.T) ServerConfig {
			t.Helper()
			return ServerConfig{Name: "up", URL: httpUpstream(t, newFeatureServer("http", nil))}
		}},
		{"stdio per agent", func(t *testing.T) ServerConfig { t.Helper(); return featureStdio("up") }},
		{"http per agent", func(t *testing.T) ServerConfig {
			t.Helper()
			return ServerConfig{Name: "up", URL: httpUpstream(t, newFeatureServer("http", nil)), Sessions: SessionsPerAgent}
		}},
	}
}

func TestServerRequestsReachTheirAgent(t *testing.T) {
	// Two agents call the same upstream at once; each is asked its own
	// question, answers it, and gets its own log message; neither sees
	// the other's. On an HTTP upstream the shared session's POST streams
	// tell the calls apart; on a stdio upstream each agent session gets its
	// own process.
	for _, tc := range featureUpstreams() {
		t.Run(tc.name, func(t *testing.T) {
			g := newGateway(t, []ServerConfig{tc.cfg(t)}, allowAll(), nil)
			base := serveHTTP(t, g, nil)
			// Each agent holds its answer until the other was asked too: both
			// elicitations are in flight at once.
			var both sync.WaitGroup
			both.Add(2)
			recs := map[string]*agentRecord{}
			sessions := map[string]*mcp.ClientSession{}
			for _, who := range []string{"alice", "bob"} {
				r := &agentRecord{onElicit: func() { both.Done(); both.Wait() }}
				recs[who] = r
				opts, setup := capableClient(who, r, false)
				token := map[string]string{"alice": aliceToken, "bob": bobToken}[who]
				cs := connectAgent(t, base, token, opts, setup)
				if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
					t.Fatal(err)
				}
				sessions[who] = cs
			}
			results := map[string]chan string{}
			for who, cs := range sessions {
				ch := make(chan string, 1)
				results[who] = ch
				go func() {
					res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__ask", Arguments: map[string]any{"tag": who}})
					if err != nil {
						ch <- "error: " + err.Error()
						return
					}
					ch <- textOf(t, res)
				}()
			}
			for who, ch := range results {
				select {
				case got := <-ch:
					if want := "accept from-" + who; got != want {
						t.Errorf("%s's call = %q, want %q", who, got, want)
					}
				case <-time.After(testWait):
					t.Fatalf("%s's call did not return", who)
				}
				if got := recs[who].get(&recs[who].elicitations); !slices.Equal(got, []string{"question-" + who}) {
					t.Errorf("%s was asked %q, want only its own question", who, got)
				}
				if got := recs[who].waitLen(&recs[who].logs, 1); !slices.Equal(got, []string{"log-" + who}) {
					t.Errorf("%s got log messages %q, want only its own", who, got)
				}
			}

			// Sampling and roots reach the calling agent too.
			for who, cs := range sessions {
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__sample"})
				if err != nil || textOf(t, res) != "sampled by "+who {
					t.Errorf("%s sample = %v, want its own answer", who, err)
				}
				res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__roots"})
				if err != nil || textOf(t, res) != "file:///"+who {
					t.Errorf("%s roots = %+v %v, want its own roots", who, res, err)
				}
			}
			if tc.name == "stdio per agent" {
				// The calls went the raw way (rawcall.go), the server's
				// requests and log messages through the SDK.
				if n := perAgentRawCalls(g, "up"); n != 6 {
					t.Errorf("%d raw calls on the per-agent sessions, want 6", n)
				}
			}
		})
	}
}

func TestServerRequestsNeedTheCapability(t *testing.T) {
	// An agent that did not declare elicitation, sampling or roots: the
	// upstream gets the error a client without them gives.
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newFeatureServer("http", nil))}}, allowAll(), nil)
	rec := &agentRecord{}
	opts, _ := capableClient("carol", rec, true)
	cs := connectAgent(t, serveHTTP(t, g, nil), aliceToken, opts, nil)
	for tool, want := range map[string]string{"ask": "does not support elicitation", "sample": "does not support sampling", "roots": "does not support roots"} {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__" + tool, Arguments: map[string]any{"tag": "carol"}})
		if err != nil || !res.IsError || !strings.Contains(textOf(t, res), want) {
			t.Errorf("%s without the capability = %+v %v, want the upstream to see %q", tool, res, err, want)
		}
	}
}

func TestSharedStdioRefusesServerRequests(t *testing.T) {
	// Over one stdio session shared by agents nothing ties an elicitation
	// to a call: it is refused, never guessed; its log message goes to
	// toolgate's log, not to an agent.
	var logs logBuffer
	cfg := featureStdio("up")
	cfg.Sessions = SessionsShared
	g := newGateway(t, []ServerConfig{cfg}, allowAll(), &Options{Logger: logs.logger()})
	rec := &agentRecord{}
	opts, setup := capableClient("alice", rec, false)
	cs := connectAgent(t, serveHTTP(t, g, nil), aliceToken, opts, setup)
	if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__ask", Arguments: map[string]any{"tag": "alice"}})
	if err != nil || !res.IsError || !strings.Contains(textOf(t, res), "sessions: per_agent") {
		t.Errorf("ask on a shared stdio session = %+v %v, want the elicitation refused with a hint", res, err)
	}
	if got := rec.get(&rec.elicitations); len(got) != 0 {
		t.Errorf("the agent was asked %q on a shared stdio session", got)
	}
	logs.waitFor(t, "log-alice")
	if got := rec.get(&rec.logs); len(got) != 0 {
		t.Errorf("the agent got log messages %q from a shared stdio session", got)
	}
}

func TestLogLevelPerAgent(t *testing.T) {
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newFeatureServer("http", nil))}}, allowAll(), nil)
	base := serveHTTP(t, g, nil)
	for who, lvl := range map[string]mcp.LoggingLevel{"alice": "debug", "bob": "error"} {
		rec := &agentRecord{}
		opts, _ := capableClient(who, rec, true)
		cs := connectAgent(t, base, map[string]string{"alice": aliceToken, "bob": bobToken}[who], opts, nil)
		if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: lvl}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__log", Arguments: map[string]any{"tag": who}}); err != nil {
			t.Fatal(err)
		}
		want := []string{"error-" + who}
		if lvl == "debug" {
			want = []string{"debug-" + who, "error-" + who}
		}
		// The client handles notifications after it saw the result (notes
		// §1); error-<who> is the last message the tool sends.
		waitUntil(t, func() bool { return slices.Contains(rec.get(&rec.logs), "error-"+who) })
		if got := rec.get(&rec.logs); !slices.Equal(got, want) {
			t.Errorf("%s at level %s got %q, want %q", who, lvl, got, want)
		}
	}
}

func TestSubscriptionUpdatesReachSubscribersOnly(t *testing.T) {
	srv := newFeatureServer("http", nil)
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, srv)}}, allowAll(), nil)
	base := serveHTTP(t, g, nil)
	recs := map[string]*agentRecord{"alice": {}, "bob": {}}
	sessions := map[string]*mcp.ClientSession{}
	for who, rec := range recs {
		opts, _ := capableClient(who, rec, true)
		sessions[who] = connectAgent(t, base, map[string]string{"alice": aliceToken, "bob": bobToken}[who], opts, nil)
	}
	if err := sessions["alice"].Subscribe(t.Context(), &mcp.SubscribeParams{URI: "test://static"}); err != nil {
		t.Fatal(err)
	}
	if err := sessions["bob"].Subscribe(t.Context(), &mcp.SubscribeParams{URI: "test://http"}); err != nil {
		t.Fatal(err)
	}
	// Updates are delivered in the upstream's order: once bob got his, the
	// one before it (alice's) was delivered or filtered already.
	for _, uri := range []string{"test://static", "test://http"} {
		if err := srv.ResourceUpdated(t.Context(), &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, func() bool {
		return len(recs["bob"].get(&recs["bob"].updated)) == 1 && len(recs["alice"].get(&recs["alice"].updated)) == 1
	})
	if got := recs["alice"].get(&recs["alice"].updated); !slices.Equal(got, []string{"test://static"}) {
		t.Errorf("alice got updates %q, want only test://static", got)
	}
	if got := recs["bob"].get(&recs["bob"].updated); !slices.Equal(got, []string{"test://http"}) {
		t.Errorf("bob got updates %q, want only test://http", got)
	}
	if err := sessions["alice"].Unsubscribe(t.Context(), &mcp.UnsubscribeParams{URI: "test://static"}); err != nil {
		t.Fatal(err)
	}
}

func TestPerAgentProcessEndsWithItsSession(t *testing.T) {
	g := newGateway(t, []ServerConfig{featureStdio("up")}, allowAll(), nil)
	base := serveHTTP(t, g, nil)
	pid := func(cs *mcp.ClientSession) string {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__pid"})
		if err != nil {
			t.Fatal(err)
		}
		return textOf(t, res)
	}
	a := connectAgent(t, base, aliceToken, nil, nil)
	b := connectAgent(t, base, aliceToken, nil, nil) // the same principal, another agent session
	pa, pb := pid(a), pid(b)
	if pa == pb {
		t.Fatalf("two agent sessions share upstream process %s", pa)
	}
	if again := pid(a); again != pa {
		t.Errorf("the same agent session got process %s, then %s", pa, again)
	}
	u := g.ups["up"]
	u.agentsMu.Lock()
	var proc *process
	for ss, ac := range u.agents {
		ac.mu.Lock()
		if ac.conn != nil && fmt.Sprint(ac.conn.proc.cmd.Process.Pid) == pa {
			proc = ac.conn.proc
		}
		ac.mu.Unlock()
		_ = ss
	}
	u.agentsMu.Unlock()
	if proc == nil {
		t.Fatal("no per-agent process with the pid the tool reported")
	}
	if err := a.Close(); err != nil { // DELETE: the agent session ends
		t.Fatal(err)
	}
	select {
	case <-proc.exited:
	case <-time.After(testWait):
		t.Fatal("the per-agent process did not stop when its agent session ended")
	}
	if got := pid(b); got != pb {
		t.Errorf("the other session's process changed from %s to %s", pb, got)
	}
}

// waitUntil waits for cond, polling; it fails the test after testWait.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPromptAndResourceListChanged(t *testing.T) {
	// An upstream that adds a prompt or a resource says so; the gateway
	// lists it again and tells its agents, who then list the new item.
	srv := newFeatureServer("a", nil)
	g := newGateway(t, []ServerConfig{{Name: "a", URL: httpUpstream(t, srv)}}, allowAll(), nil)
	prompts := make(chan struct{}, 8)
	resources := make(chan struct{}, 8)
	opts := &mcp.ClientOptions{
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { prompts <- struct{}{} },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { resources <- struct{}{} },
	}
	cs := connectAgent(t, serveHTTP(t, g, nil), aliceToken, opts, nil)
	// List once, so the gateway knows what this session saw.
	if _, err := cs.ListPrompts(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ListResources(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	srv.AddPrompt(&mcp.Prompt{Name: "later"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "later"}}}}, nil
	})
	select {
	case <-prompts:
	case <-time.After(testWait):
		t.Fatal("no prompts/list_changed after the upstream added a prompt")
	}
	res, err := cs.ListPrompts(t.Context(), nil)
	if err != nil || !slices.ContainsFunc(res.Prompts, func(p *mcp.Prompt) bool { return p.Name == "a__later" }) {
		t.Errorf("prompts after the change = %+v %v, want a__later", res, err)
	}
	srv.AddResource(&mcp.Resource{URI: "test://later", Name: "later"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "later"}}}, nil
	})
	select {
	case <-resources:
	case <-time.After(testWait):
		t.Fatal("no resources/list_changed after the upstream added a resource")
	}
	rr, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "test://later"})
	if err != nil || rr.Contents[0].Text != "later" {
		t.Errorf("read of the new resource = %+v %v", rr, err)
	}
}

func TestClientCapabilitiesPerServer(t *testing.T) {
	// By default toolgate declares roots, sampling and elicitation (form
	// and URL) to every server; client_capabilities narrows that, and a
	// request for a capability not offered is refused, never forwarded.
	g := newGateway(t, []ServerConfig{
		{Name: "all", URL: httpUpstream(t, newFeatureServer("all", nil))},
		{Name: "noroots", URL: httpUpstream(t, newFeatureServer("noroots", nil)), ClientCapabilities: []string{CapabilitySampling, CapabilityElicitation}},
	}, allowAll(), nil)
	rec := &agentRecord{}
	opts, setup := capableClient("alice", rec, false)
	cs := connectAgent(t, serveHTTP(t, g, nil), aliceToken, opts, setup)
	for server, want := range map[string]string{"all": "roots sampling elicitation elicitation.url", "noroots": "sampling elicitation elicitation.url"} {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: server + "__caps"})
		if err != nil || textOf(t, res) != want {
			t.Errorf("%s declared %+v %v, want %q", server, res, err, want)
		}
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "noroots__roots"})
	if err != nil || !res.IsError || !strings.Contains(textOf(t, res), "does not offer roots") {
		t.Errorf("roots/list from a server not offered roots = %+v %v, want refused", res, err)
	}
	if _, err := New(t.Context(), []ServerConfig{{Name: "x", URL: "http://127.0.0.1:1/", ClientCapabilities: []string{"tasks"}}}, allowAll(), nil); err == nil {
		t.Error("New accepted an unknown client capability")
	}
}

func TestUnboundRequestOutlivesTheCallItArrivedDuring(t *testing.T) {
	// A per-agent server asks for the roots on its own while the agent's
	// call is in flight, and the agent answers after that call ended: the
	// question is the agent session's, not the call's, so it is not
	// withdrawn when the call ends.
	g := newGateway(t, []ServerConfig{featureStdio("up")}, allowAll(), nil)
	called := make(chan struct{})
	opts, setup := capableClient("alice", &agentRecord{}, false)
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, opts)
	setup(c)
	c.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "roots/list" {
				select { // answer only after the call returned
				case <-called:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return next(ctx, method, req)
		}
	})
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: serveHTTP(t, g, nil) + "/mcp", HTTPClient: httpClientWithToken(aliceToken)}, era2025)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.Close() }()
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__roots_async"}); err != nil {
		t.Fatal(err)
	}
	close(called)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__roots_async_result"})
	if err != nil || textOf(t, res) != "file:///alice" {
		t.Errorf("the server's own roots/list = %+v %v, want the agent's roots", res, err)
	}
}
