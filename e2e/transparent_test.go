package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Issue 10: a transparent gateway. Everything MCP 2025-11-25 offers passes
// through toolgate to the agent that asked, under the same gate.

// agentLog is what one agent client received from the gateway.
type agentLog struct {
	mu           sync.Mutex
	elicitations []string
	samples      int
	logs         []string
	updated      []string
	changed      chan struct{} // closed and replaced on every change
	// onElicit, when set, runs in the elicitation handler before it answers.
	onElicit func()
}

func newAgentLog() *agentLog { return &agentLog{changed: make(chan struct{})} }

func (l *agentLog) add(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f()
	close(l.changed)
	l.changed = make(chan struct{})
}

// wait waits until cond holds (read under the log's lock).
func (l *agentLog) wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(waitFor(t))
	defer deadline.Stop()
	for {
		l.mu.Lock()
		ok, ch := cond(), l.changed
		l.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("never got %s", what)
		}
	}
}

func (l *agentLog) snapshot() (elicitations, logs, updated []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.elicitations), slices.Clone(l.logs), slices.Clone(l.updated)
}

// capableAgent returns client options for an agent called who that
// declares sampling, elicitation (form and URL) and roots (file:///who),
// and records what it gets in l.
func capableAgent(who string, l *agentLog) (*mcp.ClientOptions, func(*mcp.Client)) {
	opts := &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{
			RootsV2:     &mcp.RootCapabilities{ListChanged: true},
			Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}},
		},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			l.add(func() { l.elicitations = append(l.elicitations, req.Params.Message) })
			if l.onElicit != nil {
				l.onElicit()
			}
			if req.Params.Mode == "url" {
				return &mcp.ElicitResult{Action: "accept"}, nil
			}
			content := map[string]any{"answer": "from-" + who}
			if props, ok := req.Params.RequestedSchema.(map[string]any)["properties"].(map[string]any); ok {
				if _, hasName := props["name"]; hasName {
					content = map[string]any{"name": who, "check": true, "email": who + "@example.com"}
				}
			}
			return &mcp.ElicitResult{Action: "accept", Content: content}, nil
		},
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			l.add(func() { l.samples++ })
			return &mcp.CreateMessageResult{Role: "assistant", Model: "e2e", Content: &mcp.TextContent{Text: "sampled by " + who}}, nil
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			l.add(func() { l.logs = append(l.logs, fmt.Sprint(req.Params.Data)) })
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			l.add(func() { l.updated = append(l.updated, req.Params.URI) })
		},
	}
	return opts, func(c *mcp.Client) {
		//lint:ignore SA1019 roots are part of what issue 10 passes through.
		c.AddRoots(&mcp.Root{URI: "file:///" + who, Name: who})
	}
}

// connectCapable connects to g with token as an agent built by
// capableAgent.
func (g *gw) connectCapable(t *testing.T, token, who string, l *agentLog) *mcp.ClientSession {
	t.Helper()
	opts, setup := capableAgent(who, l)
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-" + who, Version: "1"}, opts)
	setup(c)
	tr := &mcp.StreamableClientTransport{Endpoint: g.MCP, HTTPClient: &http.Client{Transport: &bearer{token: token, base: g.tr}}}
	ctx, cancel := context.WithTimeout(t.Context(), waitFor(t))
	defer cancel()
	cs, err := c.Connect(ctx, tr, era2025)
	if err != nil {
		t.Fatalf("connect to %s: %v", g.MCP, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// everythingServer is a servers: section with the npm everything server
// over stdio as "ev".
func everythingServer(t *testing.T, n npm) string {
	t.Helper()
	return `
servers:
  ev:
    command: ` + q(n.node) + `
    args: [` + q(n.script(t, "mcp-server-everything")) + `, stdio]
    call_timeout: 60s
`
}

// directTools lists the tools the npm everything server gives a capable
// client talking to it directly (the same capabilities as capableAgent).
func directTools(t *testing.T, n npm) []string {
	t.Helper()
	opts, setup := capableAgent("direct", newAgentLog())
	listed := make(chan struct{}, 16)
	opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) { listed <- struct{}{} }
	c := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, opts)
	setup(c)
	cmd := exec.Command(n.node, n.script(t, "mcp-server-everything"), "stdio")
	cs, err := c.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect to the everything server directly: %v", err)
	}
	defer func() { _ = cs.Close() }()
	// Its capability-dependent tools are registered after initialization
	// and announced with list_changed.
	select {
	case <-listed:
	case <-time.After(waitFor(t)):
		t.Fatal("the everything server did not announce its capability-dependent tools")
	}
	var names []string
	for tl, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tl.Name)
	}
	sort.Strings(names)
	return names
}

// TestEverythingServerThroughToolgate puts the npm everything server
// behind toolgate and checks that a capable go-sdk client gets what it
// would get directly: every tool, its prompts, resources and templates,
// completion, its sampling, elicitation and roots tools, and resource
// subscriptions.
func TestEverythingServerThroughToolgate(t *testing.T) {
	n := findNPM(t)
	want := directTools(t, n)
	if len(want) < 16 {
		t.Fatalf("the everything server gives a capable client %d tools (%q), want at least 16", len(want), want)
	}
	g := startGateway(t, gatewayConfig(filepath.Join(t.TempDir(), "toolgate.db"), everythingServer(t, n)+`
policy:
  default: allow
`), nil)
	l := newAgentLog()
	cs := g.connectCapable(t, agentToken, "alice", l)
	ctx := t.Context()

	// Every tool, as ev__<tool>: the gateway's own session declared the
	// capabilities, so the capability-dependent tools are there too.
	var got []string
	deadline := time.Now().Add(waitFor(t))
	for {
		got = got[:0]
		for tl, err := range cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, strings.TrimPrefix(tl.Name, "ev__"))
		}
		sort.Strings(got)
		if slices.Equal(got, want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(pollEvery)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("tools through toolgate:\n  %q\nwant (directly):\n  %q", got, want)
	}
	t.Logf("%d tools, as directly", len(got))

	// Prompts, named like tools; get one with arguments.
	var prompts []string
	for p, err := range cs.Prompts(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		prompts = append(prompts, p.Name)
	}
	for _, p := range []string{"ev__simple-prompt", "ev__args-prompt", "ev__completable-prompt", "ev__resource-prompt"} {
		if !slices.Contains(prompts, p) {
			t.Errorf("prompts %q lack %s", prompts, p)
		}
	}
	pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "ev__args-prompt", Arguments: map[string]string{"city": "Lyon"}})
	if err != nil || len(pr.Messages) == 0 || !strings.Contains(pr.Messages[0].Content.(*mcp.TextContent).Text, "Lyon") {
		t.Errorf("prompts/get ev__args-prompt = %+v, %v", pr, err)
	}
	comp, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "ev__completable-prompt"}, Argument: mcp.CompleteParamsArgument{Name: "department", Value: "Eng"}})
	if err != nil || !slices.Equal(comp.Completion.Values, []string{"Engineering"}) {
		t.Errorf("completion/complete = %+v, %v", comp, err)
	}

	// Resources (every page), templates, reads.
	var resources []string
	for r, err := range cs.Resources(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		resources = append(resources, r.URI)
	}
	if len(resources) == 0 {
		t.Fatal("no resources listed")
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: resources[0]})
	if err != nil || len(rr.Contents) == 0 {
		t.Errorf("resources/read %s = %+v, %v", resources[0], rr, err)
	}
	var tmpls []string
	for tp, err := range cs.ResourceTemplates(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		tmpls = append(tmpls, tp.URITemplate)
	}
	if !slices.Contains(tmpls, "demo://resource/dynamic/text/{resourceId}") {
		t.Errorf("templates %q lack demo://resource/dynamic/text/{resourceId}", tmpls)
	}
	rr, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "demo://resource/dynamic/text/3"})
	if err != nil || len(rr.Contents) == 0 || rr.Contents[0].URI != "demo://resource/dynamic/text/3" {
		t.Errorf("resources/read of a template URI = %+v, %v", rr, err)
	}

	// The sampling, elicitation and roots tools succeed: their requests
	// reach this agent, and its answers go back.
	call := func(tool string, args map[string]any) string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__" + tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if res.IsError {
			t.Fatalf("%s: isError %s", tool, text(res))
		}
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String()
	}
	if out := call("trigger-sampling-request", map[string]any{"prompt": "hello"}); !strings.Contains(out, "sampled by alice") {
		t.Errorf("trigger-sampling-request = %q, want the agent's answer", out)
	}
	if out := call("trigger-elicitation-request", map[string]any{}); !strings.Contains(out, "alice@example.com") {
		t.Errorf("trigger-elicitation-request = %q, want the agent's answer", out)
	}
	if out := call("get-roots-list", map[string]any{}); !strings.Contains(out, "file:///alice") {
		t.Errorf("get-roots-list = %q, want the agent's roots", out)
	}
	if slices.Contains(want, "trigger-url-elicitation") { // URL mode elicitation
		call("trigger-url-elicitation", map[string]any{"url": "https://example.com/consent"})
		elicitations, _, _ := l.snapshot()
		if !slices.Contains(elicitations, "Please open the link to complete this action.") {
			t.Errorf("the URL elicitation did not reach the agent: %q", elicitations)
		}
	}

	// A subscription receives updates.
	sub := resources[0]
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: sub}); err != nil {
		t.Fatalf("resources/subscribe %s: %v", sub, err)
	}
	call("toggle-subscriber-updates", map[string]any{})
	l.wait(t, "a resources/updated notification for "+sub, func() bool { return slices.Contains(l.updated, sub) })
	if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: sub}); err != nil {
		t.Errorf("resources/unsubscribe: %v", err)
	}
	call("toggle-subscriber-updates", map[string]any{})
}

// startHTTPUpstream runs testupstream over Streamable HTTP (with the extra
// flags) and returns its URL and record file.
func startHTTPUpstream(t *testing.T, extra ...string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	record, ready := filepath.Join(dir, "record.log"), filepath.Join(dir, "ready")
	cmd := exec.Command(bins.upstream, append([]string{"-record", record, "-http", "127.0.0.1:0", "-ready-file", ready}, extra...)...)
	cmd.Env = childEnv()
	stderr := new(syncBuffer)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		stopProcess(t, cmd.Process, exited)
		checkChildLog(t, "testupstream -http", stderr)
	})
	deadline := time.Now().Add(waitFor(t))
	for {
		if b, err := os.ReadFile(ready); err == nil && len(b) > 0 {
			return string(b), record
		}
		select {
		case <-exited:
			t.Fatalf("testupstream -http exited: %s", stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("testupstream -http not ready")
		}
		time.Sleep(pollEvery)
	}
}

// TestTwoAgentsEachGetTheirOwn: two agents call the same upstream at once;
// each call triggers a log message and an elicitation; each agent receives
// only its own, on a stdio upstream (one process per agent session, the
// default) and on an HTTP upstream (one shared session; the gateway ties
// each request to the call whose stream carries it).
func TestTwoAgentsEachGetTheirOwn(t *testing.T) {
	for _, tc := range []struct {
		name    string
		servers func(t *testing.T) string
	}{
		{"stdio", func(t *testing.T) string {
			t.Helper()
			return upstreamServer(filepath.Join(t.TempDir(), "record.log"))
		}},
		{"http", func(t *testing.T) string {
			t.Helper()
			u, _ := startHTTPUpstream(t)
			return "\nservers:\n  t:\n    url: " + q(u) + "\n"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := startGateway(t, teamConfig(filepath.Join(t.TempDir(), "toolgate.db"), tc.servers(t)+`
policy:
  default: allow
`), teamEnv)
			// Each agent holds its answer until the other was asked too, so
			// both elicitations are open at once.
			var both sync.WaitGroup
			both.Add(2)
			agents := map[string]string{agentID: agentToken, agent2ID: agent2Token}
			logs := map[string]*agentLog{}
			sessions := map[string]*mcp.ClientSession{}
			for who, token := range agents {
				l := newAgentLog()
				l.onElicit = func() { both.Done(); both.Wait() }
				logs[who] = l
				cs := g.connectCapable(t, token, who, l)
				if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
					t.Fatal(err)
				}
				sessions[who] = cs
			}
			results := map[string]<-chan callResult{}
			for who, cs := range sessions {
				results[who] = callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "t__ask", Arguments: map[string]any{"tag": who}})
			}
			for who, ch := range results {
				if got, want := mustOK(t, await(t, ch)), "accept from-"+who; got != want {
					t.Errorf("%s's call = %q, want %q (its own answer)", who, got, want)
				}
				l := logs[who]
				l.wait(t, who+"'s log message", func() bool { return len(l.logs) > 0 })
				elicitations, got, _ := l.snapshot()
				if !slices.Equal(elicitations, []string{"question-" + who}) {
					t.Errorf("%s was asked %q, want only its own question", who, elicitations)
				}
				if !slices.Equal(got, []string{"log-" + who}) {
					t.Errorf("%s got log messages %q, want only its own", who, got)
				}
			}
		})
	}
}

// TestGateCoversResourcesAndPrompts: a deny rule on a resource URI glob
// refuses resources/read and hides the resources from the list; an
// approve rule on a prompt holds prompts/get until an approver decides,
// through the CLI.
func TestGateCoversResourcesAndPrompts(t *testing.T) {
	n := findNPM(t)
	g := startGateway(t, gatewayConfig(filepath.Join(t.TempDir(), "toolgate.db"), everythingServer(t, n)+`
policy:
  default: allow
  rules:
    - name: no s documents
      server: ev
      resources: ["demo://resource/static/document/s*"]
      effect: deny
    - name: args prompt needs a human
      server: ev
      prompts: [args-prompt]
      effect: approve
      approval: { timeout: 2m }
`), nil)
	cs := g.connectCapable(t, agentToken, "alice", newAgentLog())
	ctx := t.Context()

	var listed []string
	for r, err := range cs.Resources(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, r.URI)
	}
	if len(listed) == 0 {
		t.Fatal("no resources listed")
	}
	for _, u := range listed {
		if strings.HasPrefix(u, "demo://resource/static/document/s") {
			t.Errorf("denied resource %s is listed", u)
		}
	}
	if !slices.Contains(listed, "demo://resource/static/document/features.md") {
		t.Errorf("resources %q lack the allowed features.md", listed)
	}
	_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "demo://resource/static/document/startup.md"})
	var wire *jsonrpc.Error
	if !errors.As(err, &wire) || wire.Code != -32010 || !strings.Contains(wire.Message, "no s documents") {
		t.Errorf("reading a denied resource = %v, want JSON-RPC error -32010 naming the rule", err)
	}
	if rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "demo://resource/static/document/features.md"}); err != nil || len(rr.Contents) == 0 {
		t.Errorf("reading an allowed resource = %v", err)
	}

	type getResult struct {
		res *mcp.GetPromptResult
		err error
	}
	held := make(chan getResult, 1)
	go func() {
		res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "ev__args-prompt", Arguments: map[string]string{"city": "Oslo"}})
		held <- getResult{res, err}
	}()
	pending := waitPending(t, g.Admin, 1)
	a := pending[0]
	if a.Server != "ev" || a.Tool != "args-prompt" || !strings.Contains(string(a.Arguments), "Oslo") {
		t.Errorf("pending approval %+v, want ev's args-prompt with its arguments", a)
	}
	if show := mustCLI(t, g.Admin, "show", a.ID); !strings.Contains(show, "prompt_get") {
		t.Errorf("approvals show does not say it is a prompt_get:\n%s", show)
	}
	select {
	case r := <-held:
		t.Fatalf("prompts/get returned before the approval: %+v %v", r.res, r.err)
	default:
	}
	mustCLI(t, g.Admin, "approve", a.ID)
	select {
	case r := <-held:
		if r.err != nil || len(r.res.Messages) == 0 || !strings.Contains(r.res.Messages[0].Content.(*mcp.TextContent).Text, "Oslo") {
			t.Errorf("prompts/get after approval = %+v, %v", r.res, r.err)
		}
	case <-time.After(waitFor(t)):
		t.Fatal("prompts/get still held after the approval")
	}
	if got := waitState(t, g.Admin, a.ID, "consumed"); got.DispatchOutcome != "ok" {
		t.Errorf("approval outcome %q, want ok", got.DispatchOutcome)
	}
}
