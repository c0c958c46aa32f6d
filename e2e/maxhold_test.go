package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxHoldPolicy holds every t__echo_raw call for approval (timeout 5m,
// longer than any client waits) and links approvals to an inbox.
const maxHoldPolicy = `
approvals:
  public_url: https://toolgate.example/base
policy:
  default: deny
  rules:
    - name: echo needs approval
      server: t
      tools: [echo_raw]
      effect: approve
      approval: { timeout: 5m }
`

// awaitWithin waits for a background call's outcome for up to d.
func awaitWithin(t *testing.T, ch <-chan callResult, d time.Duration) callResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("call did not return within %v", d)
		return callResult{}
	}
}

// TestMaxHoldAnswersCallersWithoutProgressToken (issue 11): with the
// default approvals.max_hold (50s), a 2025 client that sent no progress
// token gets, before 55 s, an isError result naming the pending approval,
// its inbox link and "re-send the identical call to continue"; nothing ran.
// After the approval (CLI process) the identical re-send runs the call
// once; a re-send naming the approval in _meta["toolgate/approval"] gets
// the recorded result from the ledger and runs nothing; an identical new
// call that names nothing needs a new approval.
func TestMaxHoldAnswersCallersWithoutProgressToken(t *testing.T) {
	t.Parallel()
	g, record := startUpstreamGateway(t, maxHoldPolicy)
	cs := g.connect(t, nil, nil)
	args := json.RawMessage(`{"call":"max-hold"}`)

	start := time.Now()
	ch := callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "t__echo_raw", Arguments: args})
	p := waitPending(t, g.Admin, 1)[0]
	r := awaitWithin(t, ch, 55*time.Second)
	took := time.Since(start)
	t.Logf("timing: pending answer after %v (max_hold 50s)", took.Round(time.Millisecond))
	if took >= 55*time.Second {
		t.Fatalf("pending answer after %v, want before 55s", took)
	}
	msg := mustIsError(t, r)
	for _, want := range []string{"approval " + p.ID + " is pending", "https://toolgate.example/base/ui/approvals/" + p.ID, "re-send the identical call to continue"} {
		if !strings.Contains(strings.ToLower(msg), strings.ToLower(want)) {
			t.Errorf("pending answer %q does not contain %q", msg, want)
		}
	}
	if id, state, _, _ := resultApprovalMeta(t, r.res); id != p.ID || state != "pending" {
		t.Errorf("pending answer _meta names approval %q in state %q, want %q pending", id, state, p.ID)
	}
	if got := readRecord(t, record); len(got) != 0 {
		t.Fatalf("upstream ran %q before any approval", got)
	}
	if st := showJSON(t, g.Admin, p.ID).State; st != "pending" {
		t.Fatalf("approval is %q after the pending answer, want pending", st)
	}

	mustCLI(t, g.Admin, "approve", p.ID)
	if got := mustOK(t, await(t, callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "t__echo_raw", Arguments: args}))); got != string(args) {
		t.Errorf("re-send returned %q, want %s", got, args)
	}
	waitRecord(t, record, "echo_raw "+string(args))
	if n := len(approvals(t, g.Admin, "pending")); n != 0 {
		t.Errorf("%d pending approvals after the re-send, want 0 (it attached to %s)", n, p.ID)
	}

	// Naming the consumed approval: the ledger answers, nothing runs.
	named := &mcp.CallToolParams{Name: "t__echo_raw", Arguments: args, Meta: mcp.Meta{"toolgate/approval": p.ID}}
	if got := mustOK(t, await(t, callAsync(t.Context(), cs, named))); got != string(args) {
		t.Errorf("re-send naming the consumed approval returned %q, want the recorded %s", got, args)
	}
	// The same name with other arguments is refused, and runs nothing.
	other := &mcp.CallToolParams{Name: "t__echo_raw", Arguments: json.RawMessage(`{"call":"other"}`), Meta: mcp.Meta{"toolgate/approval": p.ID}}
	if msg := mustIsError(t, await(t, callAsync(t.Context(), cs, other))); !strings.Contains(msg, "different call") {
		t.Errorf("naming an approval for other arguments: %q, want a refusal saying it was made for a different call", msg)
	}
	// An identical call naming nothing is a new call: a new approval.
	ctx, cancel := context.WithCancel(t.Context())
	again := callAsync(ctx, cs, &mcp.CallToolParams{Name: "t__echo_raw", Arguments: args})
	if q := waitPending(t, g.Admin, 1)[0]; q.ID == p.ID {
		t.Errorf("an identical new call reused the consumed approval %s", p.ID)
	}
	cancel()
	<-again
	if got := readRecord(t, record); countLines(got, "echo_raw "+string(args)) != 1 {
		t.Errorf("upstream record = %q, want the call exactly once", got)
	}
}

// TestMaxHoldKeepsProgressTokenCallers (issue 11): a caller that sent a
// progress token is not answered at max_hold: it is held past 60 s with
// keep-alives, and gets the result once approved.
func TestMaxHoldKeepsProgressTokenCallers(t *testing.T) {
	t.Parallel()
	g, record := startUpstreamGateway(t, strings.Replace(maxHoldPolicy, "approvals:\n", "approvals:\n  keepalive: 5s\n", 1))
	prog := newProgressLog()
	cs := g.connect(t, &mcp.ClientOptions{ProgressNotificationHandler: prog.handler}, nil)
	args := json.RawMessage(`{"call":"held-long"}`)
	start := time.Now()
	ch := callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "t__echo_raw", Arguments: args, Meta: mcp.Meta{"progressToken": "long"}})
	p := waitPending(t, g.Admin, 1)[0]
	// 13 keep-alives at 5 s: held for more than 60 s.
	for n := 1; n <= 13; n++ {
		prog.waitCount(t, n)
		select {
		case r := <-ch:
			t.Fatalf("call with a progress token answered after %v while its approval was pending: %+v", time.Since(start), r)
		default:
		}
	}
	held := time.Since(start)
	t.Logf("timing: held %v with %d keep-alives", held.Round(time.Millisecond), len(prog.list()))
	if held <= 60*time.Second {
		t.Fatalf("13 keep-alives after %v, want more than 60s", held)
	}
	checkProgress(t, prog.list(), "long")
	mustCLI(t, g.Admin, "approve", p.ID)
	if got := mustOK(t, await(t, ch)); got != string(args) {
		t.Errorf("held call returned %q, want %s", got, args)
	}
	waitRecord(t, record, "echo_raw "+string(args))
}
