package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// heldEchoPolicy holds every t__echo_raw call for approval (timeout 1m).
const heldEchoPolicy = `
policy:
  default: deny
  rules:
    - name: echo needs approval
      server: t
      tools: [echo_raw]
      effect: approve
      approval: { timeout: 1m }
`

// TestKeepAlives holds two calls with keepalive 200ms: the one that carries
// a progress token gets increasing keep-alives under its token while held;
// the one without a token gets none.
func TestKeepAlives(t *testing.T) {
	g, record := startUpstreamGateway(t, `
approvals:
  keepalive: 200ms
  sweep_interval: 100ms
`+heldEchoPolicy)
	withTok := newProgressLog()
	tokRaw := new(syncBuffer)
	csTok := g.connect(t, &mcp.ClientOptions{ProgressNotificationHandler: withTok.handler}, tokRaw)
	noTok := newProgressLog()
	noTokRaw := new(syncBuffer)
	csNoTok := g.connect(t, &mcp.ClientOptions{ProgressNotificationHandler: noTok.handler}, noTokRaw)

	start := time.Now()
	// The call without a token is held first, so it is held for longer than
	// the one with a token by the time that one has its keep-alives.
	chNoTok := callAsync(t.Context(), csNoTok, &mcp.CallToolParams{Name: "t__echo_raw", Arguments: json.RawMessage(`{"call":"no-token"}`)})
	first := waitPending(t, g.Admin, 1)[0]
	chTok := callAsync(t.Context(), csTok, &mcp.CallToolParams{
		Name:      "t__echo_raw",
		Arguments: json.RawMessage(`{"call":"token"}`),
		Meta:      mcp.Meta{"progressToken": "ka-token"},
	})
	pending := waitPending(t, g.Admin, 2)
	var second apiApproval
	for _, p := range pending {
		if p.ID != first.ID {
			second = p
		}
	}

	held := withTok.waitCount(t, 2)
	t.Logf("timing: %d keep-alives after %v (keepalive 200ms)", len(held), time.Since(start).Round(time.Millisecond))
	checkProgress(t, held, "ka-token")
	if got := readRecord(t, record); len(got) != 0 {
		t.Fatalf("upstream ran %q before any approval", got)
	}

	mustCLI(t, g.Admin, "approve", first.ID)
	mustCLI(t, g.Admin, "approve", second.ID)
	if got := mustOK(t, await(t, chTok)); got != `{"call":"token"}` {
		t.Errorf("call with token returned %q", got)
	}
	if got := mustOK(t, await(t, chNoTok)); got != `{"call":"no-token"}` {
		t.Errorf("call without token returned %q", got)
	}
	elapsed(t, "two held calls with keep-alives, approved", start)

	all := withTok.list()
	checkProgress(t, all, "ka-token")
	for i, p := range all[:len(held)] {
		if p.Message == "" {
			t.Errorf("keep-alive %d has no message; want one saying the call waits for approval", i)
		}
	}
	// Everything sent before the result precedes it on the call's SSE
	// stream, so the captured bytes are complete up to the result.
	if n := len(wireProgress(t, tokRaw.String())); n < len(held) {
		t.Errorf("counted %d progress notifications on the wire of the call with a token, want at least %d", n, len(held))
	}
	if n := len(wireProgress(t, noTokRaw.String())); n != 0 {
		t.Errorf("the call without a progress token got %d progress notifications on the wire, want 0", n)
	}
	if got := noTok.list(); len(got) != 0 {
		t.Errorf("the session without a progress token got progress notifications: %+v", got)
	}
	if got := readRecord(t, record); len(got) != 2 {
		t.Errorf("upstream record = %q, want the two approved calls", got)
	}
}

// TestConcurrentHeldCalls is case C12: three concurrent held calls give three
// pending approvals; approving the one for "22" releases only that call.
func TestConcurrentHeldCalls(t *testing.T) {
	g, record := startUpstreamGateway(t, heldEchoPolicy)
	cs := g.connect(t, nil, nil)

	start := time.Now()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	calls := map[string]<-chan callResult{}
	for _, path := range []string{"21", "22", "23"} {
		calls[path] = callAsync(ctx, cs, &mcp.CallToolParams{Name: "t__echo_raw", Arguments: json.RawMessage(`{"path":"` + path + `"}`)})
	}
	byPath := map[string]apiApproval{}
	for _, p := range waitPending(t, g.Admin, 3) {
		var a struct{ Path string }
		if err := json.Unmarshal(p.Arguments, &a); err != nil {
			t.Fatalf("approval %s shows arguments %s: %v", p.ID, p.Arguments, err)
		}
		byPath[a.Path] = p
	}
	if len(byPath) != 3 {
		t.Fatalf("pending approvals by path = %v, want one each for 21, 22 and 23", byPath)
	}
	t.Logf("timing: three held calls pending after %v", time.Since(start).Round(time.Millisecond))

	mustCLI(t, g.Admin, "approve", byPath["22"].ID)
	if got := mustOK(t, await(t, calls["22"])); got != `{"path":"22"}` {
		t.Errorf("call 22 returned %q, want its own arguments", got)
	}
	elapsed(t, "approve one of three concurrent held calls", start)

	if got, want := readRecord(t, record), []string{`echo_raw {"path":"22"}`}; !slices.Equal(got, want) {
		t.Errorf("upstream record = %q, want only call 22", got)
	}
	for _, path := range []string{"21", "23"} {
		select {
		case r := <-calls[path]:
			t.Errorf("call %s returned (%v, %v) after only 22 was approved", path, r.res, r.err)
		default:
		}
		if a := showJSON(t, g.Admin, byPath[path].ID); a.State != "pending" {
			t.Errorf("approval for %s is %s after only 22 was approved, want pending", path, a.State)
		}
	}
	if a := showJSON(t, g.Admin, byPath["22"].ID); a.State != "consumed" {
		t.Errorf("approval for 22 is %s, want consumed", a.State)
	}

	// The caller gives up on the others: they are cancelled, and nothing
	// more runs upstream.
	cancel()
	for _, path := range []string{"21", "23"} {
		await(t, calls[path])
	}
	for _, path := range []string{"21", "23"} {
		waitState(t, g.Admin, byPath[path].ID, "cancelled")
	}
	if r := cli(t, g.Admin, "approve", byPath["21"].ID); r.Code != 1 {
		t.Errorf("approve of a cancelled request: exit %d, want 1\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if got, want := readRecord(t, record), []string{`echo_raw {"path":"22"}`}; !slices.Equal(got, want) {
		t.Errorf("upstream record = %q, want only call 22", got)
	}
}
