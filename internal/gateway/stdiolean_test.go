package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// stdioLeanGate is a real gate over a SQLite store: echo, big, sleep and
// the raw upstream's tools allowed, numbers denied, progress held for one
// human approval.
func stdioLeanGate(t *testing.T) (*sqlstore.DB, *gate.Gate) {
	t.Helper()
	db := sqlitetest.Open(t)
	p := &policy.Policy{
		Default:  policy.Allow,
		Approval: policy.Approval{Timeout: time.Minute, Mode: policy.ModeHold, Approvals: 1, ValidFor: time.Minute},
		Rules: []policy.Rule{
			{Name: "no-numbers", Tools: []string{"numbers"}, Effect: policy.Deny},
			{Name: "ask-progress", Tools: []string{"progress"}, Effect: policy.Approve},
		},
	}
	return db, gate.New(db, p, &gate.Options{})
}

// connectStdioClient serves a Go SDK client over in-process pipes with
// ServeStdio as principal desktop, and returns its session (opts: the
// client's session options; nil speaks 2026-07-28, era2025 2025-11-25).
func connectStdioClient(t *testing.T, g *Gateway, opts *mcp.ClientSessionOptions) *mcp.ClientSession {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- g.ServeStdio(t.Context(), inR, outW, approval.Principal{ID: "desktop", Kind: "agent"}) }()
	c := mcp.NewClient(&mcp.Implementation{Name: "stdio-lean-test", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.IOTransport{Reader: outR, Writer: inW}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		_ = outR.Close()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("ServeStdio: %v", err)
		}
	})
	return cs
}

// approvalIDs matches what differs between two runs of the same held call.
var approvalIDs = regexp.MustCompile(`[0-9A-HJKMNP-TV-Z]{26}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|"(expires_at|created_at|decided_at)":"[^"]*"`)

// agentView is what an agent sees of a call's answer: the result as JSON,
// or the error's text, with approval ids and times blanked.
func agentView(res *mcp.CallToolResult, err error) string {
	if err != nil {
		return "error: " + approvalIDs.ReplaceAllString(err.Error(), "<id>")
	}
	b, merr := json.Marshal(res)
	if merr != nil {
		return "unencodable: " + merr.Error()
	}
	return "result: " + approvalIDs.ReplaceAllString(string(b), "<id>")
}

// TestStdioLeanAnswersAsTheSDKPath: a Go SDK client over a pipe gets the
// same answers from the stdio lean front as from the SDK path, for every
// kind of call, on an HTTP and a stdio upstream, speaking 2025-11-25 and
// 2026-07-28; the calls the front serves are the plain 2025 ones (a
// 2026-07-28 request carries its protocol metadata in _meta: the SDK's).
func TestStdioLeanAnswersAsTheSDKPath(t *testing.T) {
	type outcome struct {
		view string
		lean int64 // calls the lean front served
	}
	cases := []struct {
		name, tool string
		args       any
		held       bool // approved by carol once pending
		cancel     bool // cancelled by the client once started
		lean       bool // served by the lean front
	}{
		{name: "allowed", tool: "echo", args: map[string]any{"a": 1, "s": "x\ny"}, lean: true},
		{name: "denied", tool: "numbers", args: map[string]any{}, lean: true},
		{name: "held then approved", tool: "progress", args: map[string]any{"k": "v"}, held: true, lean: true},
		{name: "unknown tool", tool: "nope", args: map[string]any{}},
		{name: "bad arguments", tool: "echo", args: "not an object"},
		{name: "big result", tool: "big", args: map[string]any{"n": 300 << 10}, lean: true},
		{name: "cancelled", tool: "sleep", args: map[string]any{}, cancel: true, lean: true},
	}
	ups := []struct {
		name   string
		config func(t *testing.T, h *hooks) ServerConfig
	}{
		{"http", func(t *testing.T, h *hooks) ServerConfig {
			t.Helper()
			return ServerConfig{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}
		}},
		{"stdio", func(*testing.T, *hooks) ServerConfig { return rawStdioServer("up") }},
	}
	revs := []struct {
		name string
		opts *mcp.ClientSessionOptions
	}{{"2025-11-25", era2025}, {"2026-07-28", nil}}
	for _, up := range ups {
		for _, rev := range revs {
			t.Run(up.name+"/"+rev.name, func(t *testing.T) {
				run := func(t *testing.T, lean bool) map[string]outcome {
					t.Helper()
					db, gk := stdioLeanGate(t)
					h := newHooks()
					close(h.release) // the progress tool answers at once
					g := newGateway(t, []ServerConfig{up.config(t, h)}, gk, nil)
					waitUpstream(t, g, "up", nil)
					g.noStdioLean = !lean
					var served atomic.Int64
					g.leanHook = func(s bool) {
						if s {
							served.Add(1)
						}
					}
					cs := connectStdioClient(t, g, rev.opts)
					got := map[string]outcome{}
					for _, c := range cases {
						if c.cancel && up.name != "http" {
							continue // the raw child has no hooks to say it started
						}
						before := served.Load()
						ctx, cancel := context.WithCancel(t.Context())
						type answer struct {
							res *mcp.CallToolResult
							err error
						}
						done := make(chan answer, 1)
						go func() {
							res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__" + c.tool, Arguments: c.args})
							done <- answer{res, err}
						}()
						var held approval.ID
						if c.held {
							held = approveOnlyPending(t, db, gk, approval.Principal{ID: "carol", Kind: "human"})
						}
						if c.cancel {
							within(t, h.started, "the sleeping call to start")
							cancel()
							if cause := within(t, h.ended, "the cancelled call to end"); cause == nil {
								t.Errorf("%s: the upstream's call ended without a cause", c.name)
							}
						}
						a := within(t, done, "the answer")
						cancel()
						view := agentView(a.res, a.err)
						if c.held {
							// The audit trail's outcome, as recorded by either path.
							view += fmt.Sprintf(" (recorded %s)", waitOutcome(t, db, held))
						}
						got[c.name] = outcome{view, served.Load() - before}
					}
					return got
				}
				sdk := run(t, false)
				lean := run(t, true)
				for _, c := range cases {
					s, l := sdk[c.name], lean[c.name]
					if s.view != l.view {
						t.Errorf("%s: lean front answered\n%.400s\nthe SDK path\n%.400s", c.name, l.view, s.view)
					}
					if s.lean != 0 {
						t.Errorf("%s: %d calls served lean with the lean front off", c.name, s.lean)
					}
					want := int64(0)
					if c.lean && (!c.cancel || up.name == "http") && rev.opts != nil {
						want = 1
					}
					if l.lean != want {
						t.Errorf("%s: %d calls served lean, want %d", c.name, l.lean, want)
					}
				}
			})
		}
	}
}

// TestStdioPlainCallIsServedLean: a stdio agent's plain tools/call line
// is answered by the lean front (the hook hears of it) with the
// upstream's result bytes as they came, and a call with a _meta goes the
// SDK's way; on the base (1ea6c5a) every call went the SDK's way.
func TestStdioPlainCallIsServedLean(t *testing.T) {
	g := newGateway(t, []ServerConfig{rawStdioServer("up")}, allowAll(), nil)
	waitUpstream(t, g, "up", nil)
	var lean, sdk atomic.Int64
	g.leanHook = func(s bool) {
		if s {
			lean.Add(1)
		} else {
			sdk.Add(1)
		}
	}
	a := serveRawStdio(t, g, approval.Principal{ID: "desktop", Kind: "agent"})
	a.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__numbers","arguments":{}}}`)
	line := a.response(1)
	if want := `"structuredContent":` + numbersStructured; !strings.Contains(line, want) {
		t.Errorf("answer lacks %s:\n%s", want, line)
	}
	if n := lean.Load(); n != 1 {
		t.Errorf("%d calls served by the stdio lean front, want 1", n)
	}
	// A progress token: the SDK's way (the front writes no progress).
	a.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__numbers","arguments":{},"_meta":{"progressToken":"p"}}}`)
	if line := a.response(2); !strings.Contains(line, `"structuredContent":`+numbersStructured) {
		t.Errorf("answer with a progress token:\n%s", line)
	}
	if n := lean.Load(); n != 1 {
		t.Errorf("%d calls served lean after one with a progress token, want 1", n)
	}
	// A 2026-07-28 request (its protocol metadata in _meta): the SDK's way.
	a.send(modernCallBody("3", "up__numbers", `{}`, ""))
	if line := a.response(3); !strings.Contains(line, `"structuredContent":`+numbersStructured) {
		t.Errorf("answer of a 2026-07-28 request:\n%s", line)
	}
	if n := lean.Load(); n != 1 {
		t.Errorf("%d calls served lean after a 2026-07-28 request, want 1", n)
	}
}

// TestStdioLeanBeforeInitialize: a tools/call line before initialize is
// the SDK's to refuse, as before.
func TestStdioLeanBeforeInitialize(t *testing.T) {
	g := newGateway(t, []ServerConfig{rawStdioServer("up")}, allowAll(), nil)
	waitUpstream(t, g, "up", nil)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- g.ServeStdio(t.Context(), inR, outW, approval.Principal{ID: "desktop", Kind: "agent"}) }()
	t.Cleanup(func() {
		_ = inW.Close()
		_ = outR.Close()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("ServeStdio: %v", err)
		}
	})
	a := &rawAgent{t: t, in: inW, out: bufio.NewReader(outR)}
	a.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","arguments":{}}}`)
	if line := a.response(1); !strings.Contains(line, "invalid during session initialization") {
		t.Errorf("a call before initialize was answered\n%s", line)
	}
}

// TestStdioLeanDuplicateID: a second plain call with the id of a lean
// call in flight is refused, as the HTTP lean front refuses it, and the
// first is answered once.
func TestStdioLeanDuplicateID(t *testing.T) {
	h := newHooks()
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}}, allowAll(), nil)
	a := serveRawStdio(t, g, approval.Principal{ID: "desktop", Kind: "agent"})
	a.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"up__sleep","arguments":{}}}`)
	within(t, h.started, "the sleeping call to start")
	a.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"up__echo","arguments":{}}}`)
	if line := a.response(7); !strings.Contains(line, "duplicate in-flight request ID 7") {
		t.Errorf("the duplicate was answered\n%s", line)
	}
	a.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`)
	if cause := within(t, h.ended, "the cancelled call to end"); cause == nil {
		t.Error("the sleeping call ended without a cause")
	}
	line := a.response(7)
	if strings.Contains(line, "duplicate") {
		t.Errorf("the cancelled call was answered\n%s", line)
	}
	a.send(`{"jsonrpc":"2.0","id":8,"method":"ping"}`)
	if line := a.response(8); !strings.Contains(line, `"result":{}`) {
		t.Errorf("ping after the call: %s", line)
	}
}

// within receives from c, failing the test after testWait.
func within[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(testWait):
		t.Fatalf("waited %v for %s", testWait, what)
		var zero T
		return zero
	}
}
