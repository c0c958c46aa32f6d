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
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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

// taskGapsUpstream is a stateless (2026-07-28 only) HTTP upstream for the
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
}

func newTaskGapsUpstream(t *testing.T) *taskGapsUpstream {
	t.Helper()
	up := &taskGapsUpstream{slowStarted: make(chan struct{}, 8), slowCancelled: make(chan struct{}, 8)}
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
		<-ctx.Done()
		up.slowCancelled <- struct{}{}
		return nil, ctx.Err()
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	ts := httptest.NewServer(taskSupportHandler(h, map[string]string{"solo": TaskSupportRequired, "ask": TaskSupportOptional}))
	t.Cleanup(ts.Close)
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
		a.t.Logf("line: %s", line)
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
	up := newTaskGapsUpstream(t)
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
