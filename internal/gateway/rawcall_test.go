package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
)

// rawStdioServer configures the test binary as a stdio upstream with the
// test tools and the tools of runRawUpstream.
func rawStdioServer(name string) ServerConfig {
	sc := stdioServer(name)
	sc.Env = map[string]string{envUpstream: "stdio-raw"}
	sc.Sessions = SessionsShared
	return sc
}

// runRawUpstream is the child of mode stdio-raw: the test upstream's tools
// plus tools that steer what it writes on stdout, for the raw call tests.
// A tap on its stdin learns the JSON-RPC id of each tools/call by its
// "marker" argument, and answers each notifications/cancelled with a log
// message "cancelled <id>" followed by a late answer to that id. It writes
// log messages itself (notifications/message, level warning), so that a
// test can wait for them in the gateway's log.
func runRawUpstream() error {
	var (
		mu    sync.Mutex
		ids   = map[string]string{}        // marker → raw id of its tools/call
		gates = map[string]chan struct{}{} // marker → closed by the open tool
	)
	gate := func(m string) chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		if gates[m] == nil {
			gates[m] = make(chan struct{})
		}
		return gates[m]
	}
	writeLine := func(s string) {
		_, _ = os.Stdout.WriteString(s + "\n") // one Write: lines never interleave
	}
	logLine := func(msg string) {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/message",
			"params": map[string]any{"level": "warning", "logger": "raw-child", "data": msg}})
		writeLine(string(b))
	}
	pr, pw := io.Pipe()
	go func() {
		r := bufio.NewReaderSize(os.Stdin, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					Arguments struct{ Marker string } `json:"arguments"`
					RequestID json.RawMessage         `json:"requestId"`
				} `json:"params"`
			}
			if json.Unmarshal(line, &m) == nil {
				switch m.Method {
				case "tools/call":
					if m.Params.Arguments.Marker != "" {
						mu.Lock()
						ids[m.Params.Arguments.Marker] = string(m.ID)
						mu.Unlock()
					}
				case "notifications/cancelled":
					logLine("cancelled " + string(m.Params.RequestID))
					writeLine(`{"jsonrpc":"2.0","id":` + string(m.Params.RequestID) + `,"result":{"content":[{"type":"text","text":"late"}]}}`)
				}
			}
			if _, werr := pw.Write(line); werr != nil || err != nil {
				_ = pw.CloseWithError(err)
				return
			}
		}
	}()
	var sopts *mcp.ServerOptions
	if os.Getenv(envRaw2025) != "" {
		sopts = &mcp.ServerOptions{SupportedProtocolVersions: []string{"2025-11-25"}}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "raw-upstream", Version: "1"}, sopts)
	addUpstreamTools(s, nil)
	var args struct {
		Marker string
		Lines  []string
		Pad    int
	}
	s.AddTool(&mcp.Tool{Name: "reply", Description: "writes lines, $ID replaced by its call's id and $PAD by pad bytes, then waits", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			a := args
			_ = json.Unmarshal(req.Params.Arguments, &a)
			mu.Lock()
			id := ids[a.Marker]
			mu.Unlock()
			for _, l := range a.Lines {
				l = strings.ReplaceAll(l, "$ID", id)
				writeLine(strings.ReplaceAll(l, "$PAD", strings.Repeat("x", a.Pad)))
			}
			<-ctx.Done()
			return nil, ctx.Err()
		})
	s.AddTool(&mcp.Tool{Name: "gate", Description: "logs holding <marker>, then waits for open", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			a := args
			_ = json.Unmarshal(req.Params.Arguments, &a)
			logLine("holding " + a.Marker)
			select {
			case <-gate(a.Marker):
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released " + a.Marker}}}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	s.AddTool(&mcp.Tool{Name: "open", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			a := args
			_ = json.Unmarshal(req.Params.Arguments, &a)
			close(gate(a.Marker))
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "opened"}}}, nil
		})
	return s.Run(context.Background(), &mcp.IOTransport{Reader: pr, Writer: nopWriteCloser{os.Stdout}})
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// rawTestGateway starts a gateway with the stdio-raw upstream "up"
// (shared session) and returns it, its upstream and its log.
func rawTestGateway(t *testing.T, opts *Options) (*Gateway, *upstream, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	if opts == nil {
		opts = &Options{}
	}
	opts.Logger = logs.logger()
	g := newGateway(t, []ServerConfig{rawStdioServer("up")}, allowAll(), opts)
	waitUpstream(t, g, "up", nil)
	return g, g.ups["up"], logs
}

// rawCall is u.callRaw that must take the raw path.
func rawCall(t *testing.T, ctx context.Context, u *upstream, tool string, args string) (json.RawMessage, error) {
	t.Helper()
	res, ok, err := u.callRaw(ctx, tool, json.RawMessage(args))
	if !ok {
		t.Errorf("callRaw(%s) did not take the raw path", tool)
	}
	return res, err
}

// resultText is the text of the single text content of the raw result res.
func resultText(t *testing.T, res json.RawMessage) string {
	t.Helper()
	s, err := rawText(res)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func rawText(res json.RawMessage) (string, error) {
	var r struct {
		Content []struct{ Type, Text string }
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return "", fmt.Errorf("result %s: %w", res, err)
	}
	if len(r.Content) != 1 || r.Content[0].Type != "text" {
		return "", fmt.Errorf("result %s is not one text content", res)
	}
	return r.Content[0].Text, nil
}

type rawResult struct {
	res json.RawMessage
	err error
}

// goRawCall starts callRaw in a goroutine the test waits for; the result
// arrives on the returned channel.
func goRawCall(t *testing.T, ctx context.Context, u *upstream, tool, args string) <-chan rawResult {
	t.Helper()
	ch := make(chan rawResult, 1)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	wg.Go(func() {
		res, ok, err := u.callRaw(ctx, tool, json.RawMessage(args))
		if !ok {
			err = errors.New("the raw path was not taken")
		}
		ch <- rawResult{res, err}
	})
	return ch
}

func await(t *testing.T, ch <-chan rawResult, what string) rawResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(testWait):
		t.Fatalf("%s did not return", what)
		return rawResult{}
	}
}

func TestRawCallAnswersOutOfOrder(t *testing.T) {
	_, u, logs := rawTestGateway(t, nil)
	markers := []string{"a", "b", "c", "d"}
	calls := map[string]<-chan rawResult{}
	for _, m := range markers {
		calls[m] = goRawCall(t, t.Context(), u, "gate", `{"marker":"`+m+`"}`)
	}
	for _, m := range markers {
		logs.waitFor(t, "holding "+m)
	}
	// Released last first: each answer finds its own call.
	for i := len(markers) - 1; i >= 0; i-- {
		m := markers[i]
		if _, err := rawCall(t, t.Context(), u, "open", `{"marker":"`+m+`"}`); err != nil {
			t.Fatalf("open %s: %v", m, err)
		}
		r := await(t, calls[m], "call "+m)
		if r.err != nil {
			t.Fatalf("call %s: %v", m, r.err)
		}
		if got := resultText(t, r.res); got != "released "+m {
			t.Errorf("call %s got %q", m, got)
		}
		for _, earlier := range markers[:i] {
			select {
			case r := <-calls[earlier]:
				t.Fatalf("call %s returned before it was released: %+v", earlier, r)
			default:
			}
		}
	}
}

func TestRawCallCancelSendsCancelledAndDropsLateAnswer(t *testing.T) {
	_, u, logs := rawTestGateway(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	call := goRawCall(t, ctx, u, "gate", `{"marker":"c1"}`)
	logs.waitFor(t, "holding c1")
	cancel()
	r := await(t, call, "the cancelled call")
	var f *callFailure
	if !errors.As(r.err, &f) || f.outcome != approval.OutcomeCancelledAfterDispatch {
		t.Fatalf("cancelled call: %v, want a cancelled-after-dispatch failure", r.err)
	}
	// The child got notifications/cancelled for the call's raw id and
	// answered it late; the late answer reached nobody.
	logs.waitFor(t, `cancelled \"tg-`)
	logs.waitFor(t, "nobody waits for")
	if n := logs.count("skipped a line"); n != 0 {
		t.Errorf("the late answer was treated as a bad line:\n%s", logs)
	}
	res, err := rawCall(t, t.Context(), u, "echo", `{"after":"cancel"}`)
	if err != nil || resultText(t, res) != `{"after":"cancel"}` {
		t.Fatalf("call after the cancel: %s %v", res, err)
	}
}

func TestRawCallsFailWhenTheChildDies(t *testing.T) {
	_, u, logs := rawTestGateway(t, nil)
	var calls []<-chan rawResult
	for i := range 3 {
		m := fmt.Sprint("w", i)
		calls = append(calls, goRawCall(t, t.Context(), u, "gate", `{"marker":"`+m+`"}`))
		logs.waitFor(t, "holding "+m)
	}
	_, err := rawCall(t, t.Context(), u, "die", `{}`)
	for i, ch := range append(calls, closedResult(err)) {
		r := await(t, ch, fmt.Sprint("call ", i))
		var f *callFailure
		if !errors.As(r.err, &f) || f.outcome != approval.OutcomeTransportError || !strings.Contains(f.msg, "is unavailable") {
			t.Errorf("call %d: %v, want an upstream-unavailable failure", i, r.err)
		}
	}
}

func closedResult(err error) <-chan rawResult {
	ch := make(chan rawResult, 1)
	ch <- rawResult{err: err}
	return ch
}

func TestRawCallBadAnswers(t *testing.T) {
	const limit = 64 << 10
	_, u, logs := rawTestGateway(t, &Options{MaxResultBytes: limit})
	for _, tc := range []struct {
		name  string
		lines []string
		pad   int
		want  string // in the error; "" for a result
		text  string // the result's text
	}{
		{name: "not JSON", lines: []string{`{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"raw-result-data"`}, want: "malformed response (not valid JSON)"},
		{name: "result not an object", lines: []string{`{"jsonrpc":"2.0","id":$ID,"result":5}`}, want: "the result is not an object"},
		{name: "bad error", lines: []string{`{"jsonrpc":"2.0","id":$ID,"error":{"code":"x"}}`}, want: "malformed response"},
		{name: "oversized", lines: []string{`{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"$PAD"}]}}`}, pad: 2 * limit, want: "exceeds limits.max_result_bytes"},
		{name: "upstream error", lines: []string{`{"jsonrpc":"2.0","id":$ID,"error":{"code":-32602,"message":"no such thing"}}`}, want: "no such thing"},
		{name: "wrong ids first", lines: []string{
			`{"jsonrpc":"2.0","id":"tg-999999","result":{"content":[{"type":"text","text":"wrong"}]}}`,
			`{"jsonrpc":"2.0","id":424242,"result":{"content":[{"type":"text","text":"sdk id"}]}}`,
			`{"jsonrpc":"2.0","id":"tg-x","result":{}}`,
			`{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"right"}]}}`,
		}, text: "right"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args, _ := json.Marshal(map[string]any{"marker": tc.name, "lines": tc.lines, "pad": tc.pad})
			res, err := rawCall(t, t.Context(), u, "reply", string(args))
			if tc.want == "" {
				if err != nil || resultText(t, res) != tc.text {
					t.Fatalf("got %s %v, want %q", res, err, tc.text)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %s %v, want an error with %q", res, err, tc.want)
			}
			var wire *jsonrpc.Error
			var f *callFailure
			if !errors.As(err, &wire) && !errors.As(err, &f) {
				t.Errorf("error %T is neither a JSON-RPC error nor a call failure", err)
			}
		})
	}
	// Nothing ended the session: the same process still answers.
	res, err := rawCall(t, t.Context(), u, "echo", `{"still":"here"}`)
	if err != nil || resultText(t, res) != `{"still":"here"}` {
		t.Fatalf("call after the bad answers: %s %v\n%s", res, err, logs)
	}
	// A malformed answer is the call's result data: logged by size, not
	// by content.
	if l := logs.String(); !strings.Contains(l, "a malformed answer to a call") || strings.Contains(l, "raw-result-data") {
		t.Errorf("want the malformed answer logged without its bytes:\n%s", l)
	}
}

func TestRawCallKeepsNumbers(t *testing.T) {
	_, u, _ := rawTestGateway(t, nil)
	res, err := rawCall(t, t.Context(), u, "numbers", `{"huge":true}`)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		StructuredContent json.RawMessage            `json:"structuredContent"`
		Meta              map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		t.Fatal(err)
	}
	if string(r.StructuredContent) != numbersHuge {
		t.Errorf("structuredContent = %s, want %s", r.StructuredContent, numbersHuge)
	}
	if string(r.Meta["big"]) != numbersMeta {
		t.Errorf("_meta.big = %s, want %s", r.Meta["big"], numbersMeta)
	}
	if _, ok := r.Meta[mcp.MetaKeyServerInfo]; ok {
		t.Errorf("the upstream's server info was passed on: %s", res)
	}
	// The tool-handler path decodes the same bytes once, numbers intact.
	cr, err := decodeCallResult(res)
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(cr)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"huge":1e400`, `"max":9223372036854775807`, `"big":` + numbersMeta, `"text":"numbers"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("decoded result %s lacks %s", out, want)
		}
	}
}

// TestRawAndSDKTrafficInterleave runs many raw calls with arguments larger
// than a pipe's atomic write at once with tools/list requests through the
// SDK on the same session: no line is corrupted.
func TestRawAndSDKTrafficInterleave(t *testing.T) {
	_, u, _ := rawTestGateway(t, nil)
	c, err := u.session()
	if err != nil {
		t.Fatal(err)
	}
	const callers, calls = 8, 20
	pad := strings.Repeat("p", 16<<10)
	var wg sync.WaitGroup
	errs := make(chan error, callers*calls+calls)
	for i := range callers {
		wg.Go(func() {
			for j := range calls {
				args := fmt.Sprintf(`{"caller":%d,"call":%d,"pad":"%s"}`, i, j, pad)
				res, ok, err := u.callRaw(t.Context(), "echo", json.RawMessage(args))
				if !ok || err != nil {
					errs <- fmt.Errorf("raw call %d/%d: ok %v, %w", i, j, ok, err)
					continue
				}
				if got, err := rawText(res); err != nil || got != args {
					errs <- fmt.Errorf("raw call %d/%d got another answer (%w)", i, j, err)
				}
			}
		})
	}
	wg.Go(func() {
		for range calls {
			if _, err := c.cs.ListTools(t.Context(), nil); err != nil {
				errs <- fmt.Errorf("tools/list: %w", err)
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := c.raw.count(); n < callers*calls {
		t.Errorf("%d raw calls were made, want at least %d", n, callers*calls)
	}
}

func TestCallRawDoesNotApply(t *testing.T) {
	ctx := withOrigin(t.Context(), &origin{modern: true})
	g := newGateway(t, []ServerConfig{{Name: "web", URL: httpUpstream(t, newUpstreamServer(nil))}}, allowAll(), nil)
	waitState(t, g, "web", StateConnected)
	web := g.ups["web"]
	if _, ok, err := web.callRaw(ctx, "echo", json.RawMessage(`{}`)); ok || err != nil || web.rawHTTPSeq.Load() != 0 {
		t.Errorf("callRaw on an HTTP upstream for a 2026-07-28 agent: ok %v, err %v, %d sent; want not applicable", ok, err, web.rawHTTPSeq.Load())
	}
	// An HTTP upstream's 2025-era session has a raw path of its own
	// (rawhttpcall_test.go).
	if raw, ok, err := web.callRaw(t.Context(), "echo", json.RawMessage(`{"a":1}`)); !ok || err != nil || !strings.Contains(string(raw), `{\"a\":1}`) {
		t.Errorf("callRaw on an HTTP upstream: %s, ok %v, err %v; want the raw echo", raw, ok, err)
	}
	_, u, _ := rawTestGateway(t, nil)
	if _, ok, err := u.callRaw(ctx, "echo", json.RawMessage(`{}`)); ok || err != nil {
		t.Errorf("callRaw for a 2026-07-28 agent: ok %v, err %v; want not applicable", ok, err)
	}
	c, _ := u.session()
	if n := c.raw.count(); n != 0 {
		t.Errorf("%d raw calls were sent, want none", n)
	}
}

func TestRawRequestLine(t *testing.T) {
	mk, err := rawRequestLine("a\"tool\n", json.RawMessage("{\n \"x\": [1,\n 2]\n}"), "toolgate-3")
	if err != nil {
		t.Fatal(err)
	}
	line := mk.line(7)
	want := `{"jsonrpc":"2.0","id":"tg-7","method":"tools/call","params":{"name":"a\"tool\n","arguments":{"x":[1,2]},"_meta":{"progressToken":"toolgate-3"}}}` + "\n"
	if string(line) != want {
		t.Errorf("line = %q, want %q", line, want)
	}
	for _, bad := range []string{`[1]`, `{"x":`, `"s"`} {
		if _, err := rawRequestLine("t", json.RawMessage(bad), ""); err == nil {
			t.Errorf("arguments %s were accepted", bad)
		}
	}
}

// perAgentRawCalls counts the raw calls sent on the per-agent sessions of
// upstream name that are connected now.
func perAgentRawCalls(g *Gateway, name string) uint64 {
	u := g.ups[name]
	u.agentsMu.Lock()
	defer u.agentsMu.Unlock()
	var n uint64
	for _, ac := range u.agents {
		ac.mu.Lock()
		if ac.conn != nil && ac.conn.raw != nil {
			n += ac.conn.raw.count()
		}
		ac.mu.Unlock()
	}
	return n
}

// TestRawCallLogsBeforeResult has the upstream send a burst of log
// messages and then the answer to a raw call: when the call returns, every
// one of them has been routed (here, on a shared session, to toolgate's
// log), as on the SDK's path (wire order; rawcall.go).
func TestRawCallLogsBeforeResult(t *testing.T) {
	_, u, logs := rawTestGateway(t, nil)
	const burst = 64
	for call := range 5 {
		var lines []string
		for i := range burst {
			lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"warning","data":"burst-%d-%d"}}`, call, i))
		}
		lines = append(lines, `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"after the burst"}]}}`)
		args, _ := json.Marshal(map[string]any{"marker": fmt.Sprint("burst", call), "lines": lines})
		res, err := rawCall(t, t.Context(), u, "reply", string(args))
		if err != nil || resultText(t, res) != "after the burst" {
			t.Fatalf("call %d: %s %v", call, res, err)
		}
		if n := logs.count(fmt.Sprintf("burst-%d-", call)); n != burst {
			t.Fatalf("call %d returned when %d of the %d log messages before its answer were routed", call, n, burst)
		}
	}
}
