package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// leanPolicy allows echo_raw, slow and progress, holds big_result for
// approval and denies the rest (toggle_tool), with a small request limit.
const leanPolicy = `
limits:
  max_request_bytes: 64KiB
policy:
  default: deny
  rules:
    - name: plain tools
      server: t
      tools: [echo_raw, slow, progress]
      effect: allow
    - name: big needs a human
      server: t
      tools: [big_result]
      effect: approve
`

// TestLeanCallsEndToEnd (issue 13): through the real binary, a go-sdk
// client on one 2025-11-25 session makes the calls toolgate's lean front
// answers (allowed, denied, cancelled, and a held call approved through
// the CLI, which the front holds: heldOnLeanFront; a call with a progress
// token, allowed and held, since branch leanprog) and those it hands to
// the SDK path (arguments that are not an object), and
// raw POSTs on the session (oversized, malformed
// JSON); each gets the answer the SDK path gives. Then a TypeScript SDK
// client pinned to 2025-11-25 does the same on its own session.
func TestLeanCallsEndToEnd(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	// The approver is an admin too: heldOnLeanFront reads /debug/pprof/.
	cfg := strings.Replace(gatewayConfig(filepath.Join(dir, "toolgate.db"), upstreamServer(record)+leanPolicy),
		"roles: [approver]", "roles: [approver, admin]", 1)
	g := startGateway(t, cfg, nil)
	progress := make(chan struct{}, 16)
	cs := g.connect(t, &mcp.ClientOptions{ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress <- struct{}{} }}, nil)
	ctx := t.Context()

	if got := mustOK(t, await(t, callAsync(ctx, cs, &mcp.CallToolParams{Name: "t__echo_raw", Arguments: json.RawMessage(`{"go":1}`)}))); got != `{"go":1}` {
		t.Errorf("allowed call: %q", got)
	}
	if msg := mustIsError(t, await(t, callAsync(ctx, cs, &mcp.CallToolParams{Name: "t__toggle_tool", Arguments: json.RawMessage(`{}`)}))); !strings.Contains(msg, "denied") {
		t.Errorf("denied call: %q", msg)
	}
	p := &mcp.CallToolParams{Name: "t__progress", Arguments: json.RawMessage(`{"n":2}`)}
	p.SetProgressToken("go-progress")
	mustOK(t, await(t, callAsync(ctx, cs, p)))
	for i := range 2 { // the client hands notifications to its handler asynchronously
		select {
		case <-progress:
		case <-time.After(waitFor(t)):
			t.Fatalf("%d progress notifications, want 2", i)
		}
	}
	held := callAsync(ctx, cs, &mcp.CallToolParams{Name: "t__big_result", Arguments: json.RawMessage(`{"go":"held"}`)})
	id := waitPending(t, g.Admin, 1)[0].ID
	heldOnLeanFront(t, g, true)
	mustCLI(t, g.Admin, "approve", id)
	if got := mustOK(t, await(t, held)); !strings.Contains(got, "9223372036854775807") {
		t.Errorf("held then approved call: %q, want the upstream's big integers", got)
	}
	// A held call with a progress token is held by the lean front too
	// (branch leanprog), its first keep-alive at once.
	hp := &mcp.CallToolParams{Name: "t__big_result", Arguments: json.RawMessage(`{"go":"held-token"}`)}
	hp.SetProgressToken("go-held")
	held = callAsync(ctx, cs, hp)
	id = waitPending(t, g.Admin, 1)[0].ID
	select {
	case <-progress:
	case <-time.After(waitFor(t)):
		t.Fatal("no keep-alive for the held call with a progress token")
	}
	heldOnLeanFront(t, g, true)
	mustCLI(t, g.Admin, "approve", id)
	if got := mustOK(t, await(t, held)); !strings.Contains(got, "9223372036854775807") {
		t.Errorf("held call with a token, approved: %q, want the upstream's big integers", got)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo_raw", Arguments: json.RawMessage(`"x"`)}); err == nil || !strings.Contains(err.Error(), "must be a JSON object") {
		t.Errorf("string arguments: %v, want invalid params", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	slow := callAsync(cctx, cs, &mcp.CallToolParams{Name: "t__slow", Arguments: json.RawMessage(`{"go":"cancel"}`)})
	waitRecord(t, record, `slow started {"go":"cancel"}`)
	cancel()
	waitRecord(t, record, `slow cancelled {"go":"cancel"}`)
	if r := await(t, slow); !errors.Is(r.err, context.Canceled) {
		t.Errorf("cancelled call: (%v, %v), want context.Canceled", r.res, r.err)
	}

	post := func(body io.Reader) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.MCP, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+agentToken)
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Mcp-Protocol-Version", cs.InitializeResult().ProtocolVersion)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := (&http.Client{Transport: g.tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	big := io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"t__echo_raw","arguments":{"x":"`),
		strings.NewReader(strings.Repeat("a", 128<<10)), strings.NewReader(`"}}}`))
	if status, body := post(big); status != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized call: %d %q, want 413", status, body)
	}
	if status, body := post(strings.NewReader(`{"jsonrpc":"2.0","id":"bad","method":"tools/call","params":{"name":"t__echo_raw"`)); status != http.StatusBadRequest {
		t.Errorf("malformed JSON: %d %q, want 400", status, body)
	}
	if n := countRecord(t, record, `echo_raw {"go":1}`); n != 1 {
		t.Errorf("allowed call ran %d times, want 1", n)
	}

	leanTypeScript(t, g, record)
}

// leanTypeScript runs tsclient/lean2025.mjs against g (see
// TestLeanCallsEndToEnd).
func leanTypeScript(t *testing.T, g *gw, record string) {
	t.Helper()
	node := tsV2Node(t)
	c := startTSClient(t, node, "lean2025.mjs", g.MCP, agentToken)
	type line struct {
		Step            string   `json:"step"`
		Session         string   `json:"session"`
		ProtocolVersion string   `json:"protocolVersion"`
		Result          tsResult `json:"result"`
		Error           string   `json:"error"`
		Progress        int      `json:"progress"`
		ContentType     string   `json:"contentType"`
		HeadersMs       int      `json:"headersMs"`
	}
	// answeredWhole reports whether l's answer came as application/json,
	// as the lean front answers a call decided and run within its first
	// heartbeat (1 s); a call that took longer (a loaded machine) is
	// streamed, which is right too.
	answeredWhole := func(l line) bool {
		return l.ContentType == "application/json" || (l.ContentType == "text/event-stream" && l.HeadersMs >= 1000)
	}
	next := func(want string) line {
		t.Helper()
		b := c.line(want)
		var l line
		if err := json.Unmarshal(b, &l); err != nil || l.Step != want {
			t.Fatalf("client output %q (%v), want step %s", b, err, want)
		}
		return l
	}
	if l := next("connected"); l.Session == "" || l.ProtocolVersion != "2025-11-25" {
		t.Fatalf("TypeScript client: session %q, version %q; want a 2025-11-25 session", l.Session, l.ProtocolVersion)
	}
	// The lean front answers a call whose result is all its answer
	// carries as application/json (unless it took past the first
	// heartbeat); the progress notifications of a call with a progress
	// token come on an event stream.
	if l := next("allowed"); l.Error != "" || l.Result.IsError || l.Result.text() != `{"ts":1}` || !answeredWhole(l) {
		t.Errorf("TypeScript allowed call: %+v, want its result as application/json", l)
	}
	if l := next("denied"); l.Error != "" || !l.Result.IsError || !strings.Contains(l.Result.text(), "denied") || !answeredWhole(l) {
		t.Errorf("TypeScript denied call: %+v, want its refusal as application/json", l)
	}
	if l := next("progress"); l.Error != "" || l.Result.IsError || l.Progress != 2 || l.ContentType != "text/event-stream" {
		t.Errorf("TypeScript call with progress: %+v, want 2 progress notifications on an event stream", l)
	}
	id := waitPending(t, g.Admin, 1)[0].ID
	heldOnLeanFront(t, g, true)
	mustCLI(t, g.Admin, "approve", id)
	if l := next("held"); l.Error != "" || l.Result.IsError || !strings.Contains(l.Result.text(), "9223372036854775807") {
		t.Errorf("TypeScript held then approved call: %+v", l)
	}
	waitRecord(t, record, `slow started {"ts":"cancel"}`)
	if _, err := io.WriteString(c.stdin, "cancel\n"); err != nil {
		t.Fatal(err)
	}
	waitRecord(t, record, `slow cancelled {"ts":"cancel"}`)
	if l := next("cancelled"); l.Error == "" {
		t.Errorf("TypeScript cancelled call: %+v, want an error", l)
	}
	c.wait()
}

// heldOnLeanFront checks, in the goroutine dump of g's toolgate, that the
// one call it holds (pending, as the caller made sure) is held on the lean
// front and not on the SDK path (its middleware's callTool); parked: that
// it was parked off net/http's connection (leanpark.go: no goroutine
// waits in leanHold.wait, the gate waits for it without one, or, with
// keep-alives, on one of its own), else held on the connection's
// goroutine (leanHold.wait). Both clients here make 2025-era calls on
// HTTP/1.1, which are parked since branch park25.
func heldOnLeanFront(t *testing.T, g *gw, parked bool) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, g.Admin+"/debug/pprof/goroutine?debug=2", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+approverToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("goroutine dump: %d %v", resp.StatusCode, err)
	}
	dump := string(b)
	if n, want := strings.Count(dump, "(*leanHold).wait("), map[bool]int{false: 1}[parked]; n != want {
		t.Errorf("%d goroutines hold a call on the lean front in leanHold.wait, want %d (parked %v)", n, want, parked)
	}
	if strings.Contains(dump, "(*Gateway).callTool(") {
		t.Error("a call is held on the SDK path (callTool in the goroutine dump), want it held on the lean front")
	}
}
