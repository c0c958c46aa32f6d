package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/seal"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// taskSupportHandler serves h, adding execution.taskSupport support[name]
// to each tool named in support in every tools/list result it answers
// (JSON or event stream): the SDK's Tool cannot carry the field.
func taskSupportHandler(h http.Handler, support map[string]string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		// Only a tools/list is buffered: other POSTs (subscriptions/listen)
		// may stream for as long as the session lasts.
		req, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(req))
		if !bytes.Contains(req, []byte(`"tools/list"`)) {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := rec.Body.String()
		for name, ts := range support {
			body = strings.ReplaceAll(body, `"name":"`+name+`"`, `"name":"`+name+`","execution":{"taskSupport":"`+ts+`"}`)
		}
		maps.Copy(w.Header(), rec.Header())
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = io.WriteString(w, body)
	})
}

// taskGapsUpstream is an HTTP upstream (stateless: 2026-07-28 only) for the
// stdio Tasks front's gaps (branch stdio43): solo runs only as a task,
// ask (a task tool) asks its caller once (input_required) and then
// answers with what it got, slow blocks until its call is cancelled, and
// echo is a plain tool. runs counts the calls that reached any handler;
// slowCancelled gets one value per cancelled slow call.
type taskGapsUpstream struct {
	url           string
	runs          atomic.Int32
	asked         atomic.Int32
	answered      atomic.Int32
	slowStarted   chan struct{}
	slowCancelled chan struct{}
	closed        chan struct{} // closed when the test ends
}

func newTaskGapsUpstream(t *testing.T, stateless bool) *taskGapsUpstream {
	t.Helper()
	up := &taskGapsUpstream{slowStarted: make(chan struct{}, 8), slowCancelled: make(chan struct{}, 8), closed: make(chan struct{})}
	s := mcp.NewServer(&mcp.Implementation{Name: "gaps", Version: "1"}, nil)
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	s.AddTool(&mcp.Tool{Name: "solo", InputSchema: objectSchema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		up.runs.Add(1)
		return text("solo ran"), nil
	})
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: objectSchema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		up.runs.Add(1)
		return text("echo " + string(req.Params.Arguments)), nil
	})
	s.AddTool(&mcp.Tool{Name: "ask", InputSchema: objectSchema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		up.runs.Add(1)
		if r, ok := req.Params.InputResponses["q"].(*mcp.ElicitResult); ok && r != nil {
			up.answered.Add(1)
			return text(fmt.Sprintf("got %v with %s", r.Content["a"], req.Params.RequestState)), nil
		}
		up.asked.Add(1)
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{"q": &mcp.ElicitParams{Message: "question", RequestedSchema: json.RawMessage(`{"type":"object"}`)}},
			RequestState:  "upstream-state",
		}, nil
	})
	s.AddTool(&mcp.Tool{Name: "slow", InputSchema: objectSchema}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		up.runs.Add(1)
		up.slowStarted <- struct{}{}
		select {
		case <-ctx.Done():
		case <-up.closed: // the test ended (failed)
			return text("slow ended by the test's end"), nil
		}
		up.slowCancelled <- struct{}{}
		return nil, ctx.Err()
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: stateless})
	ts := httptest.NewServer(taskSupportHandler(h, map[string]string{"solo": TaskSupportRequired, "ask": TaskSupportOptional}))
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(up.closed) }) // before ts.Close
	up.url = ts.URL
	return up
}

// taskGapsGateway is a gateway with the Tasks front in front of up
// (server "up"), policy allowing every call.
func taskGapsGateway(t *testing.T, up *taskGapsUpstream) *Gateway {
	t.Helper()
	key, err := seal.NewKey(bytes.Repeat([]byte{7}, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	gk := gate.New(sqlitetest.Open(t), policy.NewHolder(&policy.Policy{Default: policy.Allow}), &gate.Options{Key: key})
	g := newGateway(t, []ServerConfig{{Name: "up", URL: up.url}}, gk, &Options{Tasks: gk, MRTR: gk})
	if solo, ok := g.catalog.lookup("up__solo"); !ok || solo.TaskSupport != TaskSupportRequired {
		t.Fatalf("up__solo in the catalog: %+v %v, want task support required", solo, ok)
	}
	return g
}

// answers reads lines until it has the answers to every id in ids (in
// any order) and returns them by id.
func (a *rawAgent) answers(ids ...int) map[int]rpcAnswer {
	a.t.Helper()
	want := map[string]int{}
	for _, id := range ids {
		want[fmt.Sprint(id)] = id
	}
	got := map[int]rpcAnswer{}
	for len(got) < len(ids) {
		line, err := a.out.ReadString('\n')
		if err != nil {
			a.t.Fatalf("read: %v (have %v of %v)", err, got, ids)
		}
		var m struct{ ID json.RawMessage }
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		if id, ok := want[string(m.ID)]; ok {
			got[id] = decodeAnswer(a.t, []byte(line))
		}
	}
	return got
}

// isMissingTasks reports whether a is the -32021 refusal of a tool that
// runs only as a task.
func isMissingTasks(a rpcAnswer) bool {
	return a.Error != nil && a.Error.Code == -32021 && a.Result == nil
}

// TestStdioModernCallWithoutMetaRunsOnlyAsTask (branch stdio43, gap 1): a
// 2026-07-28 stdio session's tools/call of a tool that runs only as a task
// is refused (-32021) to an agent that does not declare the Tasks
// extension whatever its _meta: none at all, one without the protocol
// version (a progress token only), sent right behind the session's first
// request (before the SDK handled it), or as the session's first request
// with its version spelled with JSON escapes. Over HTTP a request without
// the version header and _meta is no 2026-07-28 request at all; over
// stdio the session's revision is known. Nothing reaches the upstream. On
// 812d89d0 each ran the tool through the SDK path: taskTaken needed the
// version in the line's own _meta, spelled plainly.
func TestStdioModernCallWithoutMetaRunsOnlyAsTask(t *testing.T) {
	up := newTaskGapsUpstream(t, true)
	g := taskGapsGateway(t, up)

	a := serveModernStdio(t, g)
	// The first request sets the session's revision; the next follows at
	// once, before the SDK has handled the first.
	a.send(taskLine(1, "tools/call", `"name":"up__echo","arguments":{"n":1}`, false))
	a.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__solo","arguments":{}}}`)
	got := a.answers(1, 2)
	if got[1].Error != nil || got[1].Result["resultType"] != "complete" {
		t.Fatalf("the first (allowed) call: %+v", got[1])
	}
	if !isMissingTasks(got[2]) {
		t.Errorf("call without _meta sent behind the first: %+v, want -32021", got[2])
	}
	for id, line := range map[int]string{
		3: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"up__solo","arguments":{}}}`,
		4: `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"up__solo","arguments":{},"_meta":{"progressToken":"p"}}}`,
		5: `{"jsonrpc":"2.0","id":5,"method":"tools\/call","params":{"name":"up__solo","arguments":{}}}`,
	} {
		a.send(line)
		if got := a.answers(id)[id]; !isMissingTasks(got) {
			t.Errorf("call %s: %+v, want -32021", line, got)
		}
	}

	// A session whose first request spells its version with escapes.
	b := serveModernStdio(t, g)
	b.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__solo","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026\u002d07\u002d28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	if got := b.answers(1)[1]; !isMissingTasks(got) {
		t.Errorf("first request with an escaped version: %+v, want -32021", got)
	}
	b.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__solo","arguments":{}}}`)
	if got := b.answers(2)[2]; !isMissingTasks(got) {
		t.Errorf("call without _meta in that session: %+v, want -32021", got)
	}
	if n := up.runs.Load(); n != 1 {
		t.Errorf("the upstream ran %d calls, want 1 (the allowed echo)", n)
	}
}

// tasksCaps is the _meta of a 2026-07-28 request of a client that declares
// the Tasks extension and form elicitation.
const tasksCaps = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}}`

// taskStatus polls tasks/get of task (ids from *id on) until its status
// is want, and returns that answer's result.
func (a *rawAgent) taskStatus(id *int, task, want string) map[string]any {
	a.t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		*id++
		a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tasks/get","params":{"taskId":%q,%s}}`, *id, task, tasksCaps))
		got := a.answers(*id)[*id]
		if got.Error != nil {
			a.t.Fatalf("tasks/get %s: %+v", task, got)
		}
		if got.Result["status"] == want {
			return got.Result
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("task %s is %v, want %s", task, got.Result["status"], want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStdioDirectTaskInputRounds (branch stdio43, gap 3): over stdio, a
// direct task whose upstream asks its caller (input_required) shows the
// upstream's question in tasks/get, tasks/update carrying the answer
// continues it, and the task completes with the upstream's answer to the
// next round, which carries the answer and the upstream's own state; each
// round ran once. The same path over HTTP is e2e's
// TestDirectTaskWaitsForItsUpstreamsInput.
func TestStdioDirectTaskInputRounds(t *testing.T) {
	up := newTaskGapsUpstream(t, true)
	g := taskGapsGateway(t, up)
	a := serveModernStdio(t, g)

	a.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__ask","arguments":{"k":1},` + tasksCaps + `}}`)
	created := a.answers(1)[1]
	task, _ := created.Result["taskId"].(string)
	if created.Error != nil || created.Result["resultType"] != "task" || task == "" {
		t.Fatalf("call of a task tool: %+v, want a task", created)
	}
	id := 1
	waiting := a.taskStatus(&id, task, "input_required")
	if reqs, _ := waiting["inputRequests"].(map[string]any); reqs["q"] == nil {
		t.Fatalf("input_required task: %v, want the upstream's question under q", waiting)
	}
	id++
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tasks/update","params":{"taskId":%q,"inputResponses":{"q":{"action":"accept","content":{"a":"yes"}}},%s}}`, id, task, tasksCaps))
	if ack := a.answers(id)[id]; ack.Error != nil || ack.Result["resultType"] != "complete" {
		t.Fatalf("tasks/update: %+v, want the ack", ack)
	}
	done := a.taskStatus(&id, task, "completed")
	if res := fmt.Sprint(done["result"]); !strings.Contains(res, "got yes with upstream-state") {
		t.Errorf("completed task's result %s, want the upstream's answer to the next round under its own state", res)
	}
	if n, m := up.asked.Load(), up.answered.Load(); n != 1 || m != 1 {
		t.Errorf("the upstream asked %d and answered %d times, want 1 and 1", n, m)
	}
}

// TestStdioTasksCallCancelled (branch stdio43, gap 3): a
// notifications/cancelled naming a Tasks client's tools/call in flight
// over stdio (a tool without task support, which runs at once on the
// Tasks front's runner) cancels the upstream call, as it cancels any call
// of the SDK path or the lean front; the call is answered, as cancelled.
// On 812d89d0 the runner outlived the request: the agent got "request
// ended" at once and the upstream call ran on until it finished by itself.
func TestStdioTasksCallCancelled(t *testing.T) {
	// Stateful: the upstream's cancellation reaches its handler (a
	// stateless one gets notifications/cancelled in a new session).
	up := newTaskGapsUpstream(t, false)
	g := taskGapsGateway(t, up)
	a := serveModernStdio(t, g)
	for i, method := range []string{"notifications/cancelled", `notifications\/cancelled`} {
		id := i + 1
		a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"up__slow","arguments":{},%s}}`, id, tasksCaps))
		select {
		case <-up.slowStarted:
		case <-time.After(testWait):
			t.Fatal("the slow call never reached the upstream")
		}
		a.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"%s","params":{"requestId":%d,"reason":"changed my mind"}}`, method, id))
		select {
		case <-up.slowCancelled:
		case <-time.After(testWait):
			t.Fatalf("%s: the upstream call was not cancelled", method)
		}
		if got := a.answers(id)[id]; got.Error == nil && got.Result["isError"] != true {
			t.Errorf("%s: the cancelled call's answer %+v, want an error", method, got)
		}
	}
}

// TestStdioEscapedMethods (branch stdio43, gap 4): a method spelled with
// JSON escapes ("tasks\/get") is the method the SDK reads, so each stdio
// front takes it as it takes the plain spelling. The Tasks front: a
// Tasks client's tools/call is a task, tasks/get, tasks/update and
// tasks/cancel are answered as the plain ones are (on 812d89d0 the
// byte checks missed them: the call ran on the SDK path without a task,
// tasks/* went to the SDK, which refused them as unknown methods). The
// lean front (a 2025-11-25 session): a denied call is refused with the
// plain call's answer, an allowed one answered with its result, and a
// notifications/cancelled naming a lean call in flight cancels it (on
// 812d89d0 the SDK got it, did not know the call, and the upstream call
// ran on).
func TestStdioEscapedMethods(t *testing.T) {
	t.Run("tasks", func(t *testing.T) {
		up := newTaskGapsUpstream(t, true)
		g := taskGapsGateway(t, up)
		a := serveModernStdio(t, g)
		a.send(`{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"up__solo","arguments":{},` + tasksCaps + `}}`)
		created := a.answers(1)[1]
		task, _ := created.Result["taskId"].(string)
		if created.Error != nil || created.Result["resultType"] != "task" || task == "" {
			t.Fatalf("escaped tools/call of a Tasks client: %+v, want a task", created)
		}
		id := 1
		a.taskStatus(&id, task, "completed")
		for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%%d,"method":%%q,"params":{"taskId":%q,"inputResponses":{},%s}}`, task, tasksCaps)
			escaped := strings.ReplaceAll(fmt.Sprintf(line, 100, method), `/`, `\/`)
			a.send(fmt.Sprintf(line, 101, method))
			a.send(escaped)
			got := a.answers(100, 101)
			if got[100].Error != nil || fmt.Sprint(got[100]) != fmt.Sprint(got[101]) {
				t.Errorf("%s escaped: %+v; plain: %+v; want the same answer", method, got[100], got[101])
			}
		}
		if n := up.runs.Load(); n != 1 {
			t.Errorf("the upstream ran %d calls, want 1", n)
		}
	})
	t.Run("lean", func(t *testing.T) {
		h := newHooks()
		gk := gate.New(sqlitetest.Open(t), policy.NewHolder(&policy.Policy{Default: policy.Allow,
			Rules: []policy.Rule{{Name: "no-numbers", Tools: []string{"numbers"}, Effect: policy.Deny}}}), nil)
		g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}}, gk, nil)
		var served atomic.Int32
		g.leanHook = func(ok bool) {
			if ok {
				served.Add(1)
			}
		}
		a := serveRawStdio(t, g, approval.Principal{ID: "desktop", Kind: "agent"})
		call := `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"k":1}}}`
		for _, tool := range []string{"up__numbers", "up__echo"} {
			a.send(fmt.Sprintf(call, 1, tool))
			plain := a.answers(1)[1]
			a.send(strings.Replace(fmt.Sprintf(call, 1, tool), "tools/call", `tools\/call`, 1))
			escaped := a.answers(1)[1]
			if fmt.Sprint(plain) != fmt.Sprint(escaped) || plain.Error != nil {
				t.Errorf("%s escaped: %+v; plain: %+v; want the same answer", tool, escaped, plain)
			}
		}
		if n := served.Load(); n != 4 {
			t.Errorf("the lean front served %d of the 4 calls", n)
		}
		a.send(fmt.Sprintf(call, 2, "up__sleep"))
		select {
		case <-h.started:
		case <-time.After(testWait):
			t.Fatal("the sleep call never reached the upstream")
		}
		a.send(`{"jsonrpc":"2.0","method":"notifications\/cancelled","params":{"requestId":2}}`)
		select {
		case cause := <-h.ended:
			t.Logf("the lean call's upstream call ended: %v", cause)
		case <-time.After(testWait):
			t.Fatal("the escaped notifications/cancelled did not cancel the lean call")
		}
	})
}

// TestStdioModernAgentOneUpstreamSession (branch stdio43, gap 2): every
// request a 2026-07-28 stdio agent sends upstream — tools/call,
// resources/read, prompts/get, completion/complete — reaches one upstream
// session, the one for 2026-07-28 agents, also on a per_agent server (the
// default of a command server, one process each): what its tool calls
// change, its reads see. On 812d89d0 a tools/call went to that session,
// resources/read and prompts/get to the shared one and completion/complete
// opened a per-agent session (for a command server: three processes, three
// separate in-memory states, for one agent).
func TestStdioModernAgentOneUpstreamSession(t *testing.T) {
	who := func(req mcp.Request) string { return req.GetSession().ID() }
	s := mcp.NewServer(&mcp.Implementation{Name: "who", Version: "1"}, &mcp.ServerOptions{
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{"session=" + who(req)}}}, nil
		},
	})
	s.AddTool(&mcp.Tool{Name: "who", InputSchema: objectSchema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "session=" + who(req)}}}, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "who"}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "session=" + who(req)}}}}, nil
	})
	s.AddResource(&mcp.Resource{URI: "test://who", Name: "who"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "session=" + who(req)}}}, nil
	})
	g := newGateway(t, []ServerConfig{{Name: "m", URL: httpUpstream(t, s), Sessions: SessionsPerAgent}}, allowAll(), nil)
	a := serveModernStdio(t, g)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`
	sessions := map[string]string{}
	for i, c := range []struct{ method, params string }{
		{"tools/call", `"name":"m__who","arguments":{}`},
		{"resources/read", `"uri":"test://who"`},
		{"prompts/get", `"name":"m__who"`},
		{"completion/complete", `"ref":{"type":"ref/prompt","name":"m__who"},"argument":{"name":"x","value":""}`},
	} {
		a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s,%s}}`, i+1, c.method, c.params, meta))
		line := a.response(i + 1)
		m := regexpSession.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("%s: no upstream session in %s", c.method, line)
		}
		sessions[c.method] = m[1]
	}
	first := sessions["tools/call"]
	for method, id := range sessions {
		if id != first {
			t.Errorf("upstream sessions %v: %s went to another session than tools/call", sessions, method)
		}
	}
	u := g.ups["m"]
	u.agentsMu.Lock()
	n := len(u.agents)
	u.agentsMu.Unlock()
	if n != 0 {
		t.Errorf("%d per-agent upstream sessions opened for a 2026-07-28 agent, want none", n)
	}
}

var regexpSession = regexp.MustCompile(`session=([A-Za-z0-9_-]+)`)
