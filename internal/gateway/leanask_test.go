package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// leanGate is the real gate over SQLite with a policy that allows every
// call, so that the lean front serves plain calls.
func leanGate(t *testing.T) Gatekeeper {
	t.Helper()
	return gate.New(sqlitetest.Open(t), policy.NewHolder(&policy.Policy{Default: policy.Allow}), &gate.Options{})
}

// newMultiAskServer is an upstream whose tool "all" asks its client for
// the roots, a sampling and two elicitations in one call, and answers with
// what it was told.
func newMultiAskServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "multi", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "all", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var out []string
			//lint:ignore SA1019 a test of roots through the gateway.
			roots, err := req.Session.ListRoots(ctx, nil)
			if err != nil {
				return nil, fmt.Errorf("roots: %w", err)
			}
			out = append(out, roots.Roots[0].URI)
			//lint:ignore SA1019 a test of sampling through the gateway.
			sample, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 5, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
			if err != nil {
				return nil, fmt.Errorf("sampling: %w", err)
			}
			out = append(out, sample.Content.(*mcp.TextContent).Text)
			for _, q := range []string{"first", "second"} {
				res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: q,
					RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}}})
				if err != nil {
					return nil, fmt.Errorf("elicitation: %w", err)
				}
				out = append(out, fmt.Sprintf("%s %v", res.Action, res.Content["answer"]))
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(out, "|")}}}, nil
		})
	return s
}

// TestLeanCallCarriesItsUpstreamRequests: an agent that opens no standalone
// GET stream calls tools whose upstream (HTTP shared, stdio per agent, HTTP
// per agent) asks it for an elicitation, a sampling and its roots mid-call,
// and a tool that asks all of these in one call: each call is served by
// the lean front, completes with the agent's answers, and the requests
// reached the agent on the call's own POST stream under the front's ids.
func TestLeanCallCarriesItsUpstreamRequests(t *testing.T) {
	for _, tc := range featureUpstreams() {
		t.Run(tc.name, func(t *testing.T) {
			g := newGateway(t, []ServerConfig{tc.cfg(t), {Name: "multi", URL: httpUpstream(t, newMultiAskServer())}}, leanGate(t), nil)
			trail := &leanTrail{}
			g.leanHook = trail.hook
			base := serveHTTP(t, g, nil)
			rec := &agentRecord{}
			cs, wire := connectTeeAgent(t, base, rec)
			waitInitialized(t, g, cs.ID())
			trail.take()
			for _, call := range []struct{ tool, want string }{
				{"up__ask", "accept from-alice"},
				{"up__sample", "sampled by alice"},
				{"up__roots", "file:///alice"},
				{"multi__all", "file:///alice|sampled by alice|accept from-alice|accept from-alice"},
			} {
				ctx, cancel := context.WithTimeout(t.Context(), testWait)
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: call.tool, Arguments: map[string]any{"tag": "alice"}})
				cancel()
				if err != nil {
					t.Fatalf("%s: %v", call.tool, err)
				}
				if got := textOf(t, res); got != call.want {
					t.Errorf("%s = %q, want %q", call.tool, got, call.want)
				}
			}
			if got := trail.take(); len(got) != 4 || !got[0] || !got[1] || !got[2] || !got[3] {
				t.Errorf("lean trail %v, want the four calls served by the lean front", got)
			}
			// No GET stream was opened: the requests came on the calls' POST
			// streams, under the front's own ids.
			all := wire.String()
			for _, m := range []string{methodElicit, methodCreateMessage, methodListRoots} {
				if !strings.Contains(all, `"id":"`+leanAskPrefix) || !strings.Contains(all, `"method":"`+m+`"`) {
					t.Errorf("no %s with a lean id on the POST streams", m)
				}
			}
			if got := rec.get(&rec.elicitations); len(got) != 3 {
				t.Errorf("agent was asked %q, want three questions", got)
			}
		})
	}
}

// connectTeeAgent connects alice's capable agent (capableClient, recording
// in rec), which opens no standalone GET stream, to the gateway at base;
// wire holds what the gateway sent it.
func connectTeeAgent(t *testing.T, base string, rec *agentRecord) (cs *mcp.ClientSession, wire *tee) {
	t.Helper()
	opts, setup := capableClient("alice", rec, false)
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, opts)
	setup(c)
	wire = &tee{next: bearer{token: aliceToken, next: http.DefaultTransport}}
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
		HTTPClient: &http.Client{Transport: wire}, DisableStandaloneSSE: true}, era2025)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, wire
}

// rawLeanCall is a tools/call POSTed by hand on an agent's session, its
// SSE stream read message by message.
type rawLeanCall struct {
	status int
	msgs   chan map[string]any // closed when the stream ends
}

// rawPost POSTs body on session sid as token's principal and returns the
// response; the caller closes its body.
func rawPost(t *testing.T, base, token, sid, version, body string) *http.Response {
	t.Helper()
	return sessionRequest(t, http.MethodPost, base, token, sid, version, strings.NewReader(body))
}

// postStatus POSTs body and returns the status.
func postStatus(t *testing.T, base, token, sid, version, body string) int {
	t.Helper()
	resp := rawPost(t, base, token, sid, version, body)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// startRawCall POSTs a tools/call of tool with id and reads its stream.
func startRawCall(t *testing.T, base, sid, version, id, tool string) *rawLeanCall {
	t.Helper()
	resp := rawPost(t, base, aliceToken, sid, version, `{"jsonrpc":"2.0","id":"`+id+`","method":"tools/call","params":{"name":"`+tool+`","arguments":{"tag":"raw"}}}`)
	c := &rawLeanCall{status: resp.StatusCode, msgs: make(chan map[string]any, 16)}
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(c.msgs)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				if json.Unmarshal([]byte(data), &m) == nil {
					c.msgs <- m
				}
			}
		}
	})
	t.Cleanup(func() { _ = resp.Body.Close(); wg.Wait() })
	return c
}

// next returns the stream's next message, or nil once it ended.
func (c *rawLeanCall) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case m := <-c.msgs:
		return m
	case <-time.After(testWait):
		t.Fatal("no message on the lean call's stream")
		return nil
	}
}

// question waits for the server→client request method on c's stream and
// returns its id.
func (c *rawLeanCall) question(t *testing.T, method string) string {
	t.Helper()
	m := c.next(t)
	id, _ := m["id"].(string)
	if m["method"] != method || !strings.HasPrefix(id, leanAskPrefix) {
		t.Fatalf("stream message %v, want %s under a lean id", m, method)
	}
	return id
}

// leanResultText is the text of the tools/call result message m.
func leanResultText(t *testing.T, m map[string]any) string {
	t.Helper()
	var r struct {
		Result *mcp.CallToolResult `json:"result"`
	}
	b, _ := json.Marshal(m)
	if err := json.Unmarshal(b, &r); err != nil || r.Result == nil || len(r.Result.Content) == 0 {
		t.Fatalf("stream message %v is not a tool result", m)
	}
	return r.Result.Content[0].(*mcp.TextContent).Text
}

// leanSessionOf returns the lean front's entry of session sid.
func leanSessionOf(t *testing.T, g *Gateway, sid string) *leanSession {
	t.Helper()
	var s *leanSession
	g.leanRegs.Range(func(k, _ any) bool {
		s = k.(*leanSessions).get(sid)
		return s == nil
	})
	if s == nil {
		t.Fatalf("no lean session %s", sid)
	}
	return s
}

// TestLeanQuestionAnswers drives the agent's side by hand: the agent's
// JSON-RPC error reaches the upstream; an answer from another session,
// another principal, under an unknown id or over the body limit is not
// delivered (answered as the SDK answers such a POST) and the right one
// then is; an answer that does not match the requested schema is refused
// as the SDK refuses it; and an agent that cancels the call meanwhile
// sees the question withdrawn.
func TestLeanQuestionAnswers(t *testing.T) {
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newFeatureServer("http", nil))}}, leanGate(t), nil)
	base := serveHTTP(t, g, &HTTPOptions{MaxBody: 1 << 12})
	rec := &agentRecord{}
	opts, setup := capableClient("alice", rec, false)
	cs := connectAgent(t, base, aliceToken, opts, setup)
	other := connectAgent(t, base, aliceToken, opts, setup)
	sid, version := cs.ID(), cs.InitializeResult().ProtocolVersion
	waitInitialized(t, g, sid)
	ls := leanSessionOf(t, g, sid)
	answer := func(id, member string) string {
		return `{"jsonrpc":"2.0","id":"` + id + `",` + member + `}`
	}

	t.Run("agent error", func(t *testing.T) {
		c := startRawCall(t, base, sid, version, "e-1", "up__ask")
		q := c.question(t, methodElicit)
		if st := postStatus(t, base, aliceToken, sid, version, answer(q, `"error":{"code":-32042,"message":"the user walked away"}`)); st != http.StatusAccepted {
			t.Fatalf("error answer: %d, want 202", st)
		}
		if got := leanResultText(t, c.next(t)); !strings.Contains(got, "elicitation failed") || !strings.Contains(got, "the user walked away") {
			t.Errorf("result %q, want the agent's error", got)
		}
	})

	t.Run("not delivered", func(t *testing.T) {
		c := startRawCall(t, base, sid, version, "n-1", "up__ask")
		q := c.question(t, methodElicit)
		wrong := answer(q, `"result":{"action":"accept","content":{"answer":"wrong"}}`)
		if st := postStatus(t, base, aliceToken, other.ID(), version, wrong); st != http.StatusAccepted {
			t.Errorf("answer on another session: %d, want the SDK's 202", st)
		}
		if st := postStatus(t, base, bobToken, sid, version, wrong); st == http.StatusAccepted {
			t.Errorf("answer by another principal: %d, want the SDK's refusal", st)
		}
		if st := postStatus(t, base, aliceToken, sid, version, answer(leanAskPrefix+"unknown", `"result":{"action":"accept","content":{"answer":"wrong"}}`)); st != http.StatusAccepted {
			t.Errorf("answer to an unknown id: %d, want the SDK's 202", st)
		}
		big := answer(q, `"result":{"action":"accept","content":{"answer":"`+strings.Repeat("w", 1<<12)+`"}}`)
		if st := postStatus(t, base, aliceToken, sid, version, big); st != http.StatusRequestEntityTooLarge {
			t.Errorf("oversized answer: %d, want 413", st)
		}
		if !ls.asking() {
			t.Fatal("the question no longer waits after answers that must not reach it")
		}
		if st := postStatus(t, base, aliceToken, sid, version, answer(q, `"result":{"action":"accept","content":{"answer":"right"}}`)); st != http.StatusAccepted {
			t.Fatalf("answer: %d, want 202", st)
		}
		if got := leanResultText(t, c.next(t)); got != "accept right" {
			t.Errorf("result %q, want %q", got, "accept right")
		}
		// The same answer again is one the SDK does not know.
		if st := postStatus(t, base, aliceToken, sid, version, answer(q, `"result":{"action":"decline"}`)); st != http.StatusAccepted {
			t.Errorf("answer again: %d, want the SDK's 202", st)
		}
	})

	t.Run("schema", func(t *testing.T) {
		c := startRawCall(t, base, sid, version, "s-1", "up__ask")
		q := c.question(t, methodElicit)
		postStatus(t, base, aliceToken, sid, version, answer(q, `"result":{"action":"accept","content":{"answer":5}}`))
		if got := leanResultText(t, c.next(t)); !strings.Contains(got, "does not match requested schema") {
			t.Errorf("result %q, want the content refused", got)
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		c := startRawCall(t, base, sid, version, "c-1", "up__ask")
		q := c.question(t, methodElicit)
		if st := postStatus(t, base, aliceToken, sid, version, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c-1"}}`); st != http.StatusAccepted {
			t.Fatalf("cancel: %d, want 202", st)
		}
		withdrawn := false
		for m := range c.msgs {
			if p, _ := m["params"].(map[string]any); m["method"] == "notifications/cancelled" && p["requestId"] == q {
				withdrawn = true
			}
		}
		if !withdrawn {
			t.Error("the question was not withdrawn on the call's stream")
		}
		if ls.asking() {
			t.Error("a question still waits after its call was cancelled")
		}
	})
}

// sseSink is a ResponseWriter that hands each write to a channel.
type sseSink struct {
	h      http.Header
	writes chan string
}

func (s *sseSink) Header() http.Header         { return s.h }
func (s *sseSink) WriteHeader(int)             {}
func (s *sseSink) Write(p []byte) (int, error) { s.writes <- string(p); return len(p), nil }

// writtenID is the id of the request in SSE event ev.
func writtenID(t *testing.T, ev string) string {
	t.Helper()
	var m struct {
		ID string `json:"id"`
	}
	data, _ := strings.CutPrefix(strings.TrimSpace(ev), "event: message\ndata: ")
	if err := json.Unmarshal([]byte(data), &m); err != nil || !strings.HasPrefix(m.ID, leanAskPrefix) {
		t.Fatalf("event %q is not a lean question", ev)
	}
	return m.ID
}

// TestLeanStreamQuestionEnds: a question of a lean call fails when the
// call's stream ends first (errLeanCallEnded) or the session ends
// (errLeanSessionEnded); one that only borrows the stream outlives it and
// still gets its answer; one whose upstream withdraws it is withdrawn on
// the stream; a closed stream takes no question (left to the SDK).
func TestLeanStreamQuestionEnds(t *testing.T) {
	newStream := func() (*leanStream, *leanSession, *sseSink) {
		sink := &sseSink{h: http.Header{}, writes: make(chan string, 4)}
		s := newLeanSession(nil, "alice", "2025-11-25", 0, nil)
		return &leanStream{w: sink, s: s}, s, sink
	}
	type out struct {
		written bool
		err     error
		res     *mcp.ListRootsResult
	}
	ask := func(ctx context.Context, l *leanStream, borrowed bool) chan out {
		ch := make(chan out, 1)
		go func() {
			res := new(mcp.ListRootsResult)
			w, err := l.ask(ctx, methodListRoots, nil, res, borrowed)
			ch <- out{w, err, res}
		}()
		return ch
	}

	l, s, sink := newStream()
	done := ask(t.Context(), l, false)
	id := writtenID(t, <-sink.writes)
	l.close()
	if o := <-done; !o.written || !errors.Is(o.err, errLeanCallEnded) {
		t.Errorf("call ended first: %v %v, want errLeanCallEnded", o.written, o.err)
	}
	if ev := <-sink.writes; !strings.Contains(ev, `"method":"notifications/cancelled"`) || !strings.Contains(ev, `"requestId":"`+id+`"`) {
		t.Errorf("event at the call's end %q, want notifications/cancelled for %s", ev, id)
	}
	if s.asking() {
		t.Error("the question still waits after its call ended")
	}
	if w, err := l.ask(t.Context(), methodListRoots, nil, new(mcp.ListRootsResult), false); w || err != nil {
		t.Errorf("ask on a closed stream: %v %v, want not written", w, err)
	}

	l, s, sink = newStream()
	done = ask(t.Context(), l, true)
	id = writtenID(t, <-sink.writes)
	l.close()
	if !s.deliver(id, leanReply{result: json.RawMessage(`{"roots":[{"uri":"file:///a"}]}`)}) {
		t.Fatal("a borrowed question stopped waiting when the stream ended")
	}
	if o := <-done; o.err != nil || len(o.res.Roots) != 1 || o.res.Roots[0].URI != "file:///a" {
		t.Errorf("borrowed question: %v %+v", o.err, o.res)
	}

	l, s, sink = newStream()
	done = ask(t.Context(), l, false)
	<-sink.writes
	s.endAsks()
	if o := <-done; !errors.Is(o.err, errLeanSessionEnded) {
		t.Errorf("session ended: %v, want errLeanSessionEnded", o.err)
	}

	l, _, sink = newStream()
	ctx, cancel := context.WithCancel(t.Context())
	done = ask(ctx, l, false)
	id = writtenID(t, <-sink.writes)
	cancel()
	if o := <-done; !errors.Is(o.err, context.Canceled) {
		t.Errorf("withdrawn: %v, want context.Canceled", o.err)
	}
	if ev := <-sink.writes; !strings.Contains(ev, `"method":"notifications/cancelled"`) || !strings.Contains(ev, `"requestId":"`+id+`"`) {
		t.Errorf("withdrawal event %q, want notifications/cancelled for %s", ev, id)
	}
}

// TestLeanElicitable: the lean front puts an elicitation on the call's
// stream only when its schema is absent or a flat object of primitive
// properties; any other is left to the SDK, which refuses it.
func TestLeanElicitable(t *testing.T) {
	for _, tc := range []struct {
		schema any
		want   bool
	}{
		{nil, true},
		{map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}, "b": map[string]any{"type": "integer"}}}, true},
		{map[string]any{"properties": map[string]any{"a": map[string]any{"type": "boolean"}}}, true},
		{map[string]any{"type": "array"}, false},
		{map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "object"}}}, false},
		{map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string", "properties": map[string]any{}}}}, false},
		{map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{}}}, false},
		{"not a schema", false},
	} {
		if got := leanElicitable(&mcp.ElicitParams{RequestedSchema: tc.schema}); got != tc.want {
			t.Errorf("leanElicitable(%v) = %v, want %v", tc.schema, got, tc.want)
		}
	}
	// Defaults are applied to accepted content, as ServerSession.Elicit does.
	p := &mcp.ElicitParams{RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{
		"a": map[string]any{"type": "string"}, "b": map[string]any{"type": "string", "default": "dflt"}}}}
	r := &mcp.ElicitResult{Action: "accept", Content: map[string]any{"a": "x"}}
	if err := checkElicitResult(p, r); err != nil || r.Content["b"] != "dflt" {
		t.Errorf("checkElicitResult: %v, content %v, want the default filled in", err, r.Content)
	}
	if err := checkElicitResult(p, &mcp.ElicitResult{Action: "accept", Content: map[string]any{"a": 1}}); err == nil {
		t.Error("checkElicitResult took content that does not match the schema")
	}
}

// TestLeanCancelledQuestionAnswersTheUpstream: when the agent cancels a
// lean call while its HTTP upstream waits for the agent's answer to a
// question, the upstream's request is answered with the gateway's
// JSON-RPC error before the call's stream ends, as the SDK's client
// answers it. It used to be answered on the cancelled call's context, so
// never: only the notifications/cancelled sent in the background could
// end the upstream's wait, and the gateway's Close right after aborts
// that POST, leaving the upstream's handler, and the close of its session
// (an SDK server waits for its handlers), waiting for ever (a hung
// TestLeanQuestionAnswers at the upstream's httptest.Server.Close).
func TestLeanCancelledQuestionAnswersTheUpstream(t *testing.T) {
	h := &featureHooks{inFlight: make(chan string, 4), elicited: make(chan error, 4)}
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newFeatureServer("http", h))}}, leanGate(t), nil)
	base := serveHTTP(t, g, nil)
	opts, setup := capableClient("alice", &agentRecord{}, false)
	cs := connectAgent(t, base, aliceToken, opts, setup)
	sid, version := cs.ID(), cs.InitializeResult().ProtocolVersion
	waitInitialized(t, g, sid)
	c := startRawCall(t, base, sid, version, "c-1", "up__ask")
	c.question(t, methodElicit)
	if st := postStatus(t, base, aliceToken, sid, version, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c-1"}}`); st != http.StatusAccepted {
		t.Fatalf("cancel: %d, want 202", st)
	}
	for range c.msgs {
		// Until the call's stream ends.
	}
	select {
	case err := <-h.elicited:
		var wire *jsonrpc.Error
		if !errors.As(err, &wire) {
			t.Fatalf("the upstream's question ended with %v, want the gateway's JSON-RPC error answer", err)
		}
	case <-time.After(testWait):
		t.Fatal("the upstream's question was never answered")
	}
}
