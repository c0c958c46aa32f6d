package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// retryEchoPolicy gates t__echo_raw in retry mode; approvals.retry_wait 0
// makes a re-send of a pending call answer at once.
const retryEchoPolicy = `
approvals:
  retry_wait: 0s
policy:
  default: deny
  rules:
    - name: echo in retry mode
      server: t
      tools: [echo_raw]
      effect: approve
      approval: { timeout: 1m, mode: retry }
`

// retryCaller makes the calls of TestRetryMode on one client session.
type retryCaller struct {
	t  *testing.T
	cs *mcp.ClientSession
}

// required calls with args and fails unless the answer is an isError that
// says what (e.g. "approval required") and carries a pending retry-mode
// approval in _meta; it returns the approval id.
func (c retryCaller) required(args, what string) string {
	c.t.Helper()
	r := await(c.t, callAsync(c.t.Context(), c.cs, toolCall("t__echo_raw", args)))
	msg := mustIsError(c.t, r)
	if !strings.Contains(msg, what) {
		c.t.Fatalf("call %s answered %q, want it to say %q", args, msg, what)
	}
	id, state, mode, expires := resultApprovalMeta(c.t, r.res)
	if state != "pending" || mode != "retry" {
		c.t.Errorf("call %s: _meta approval state %q, mode %q; want pending, retry", args, state, mode)
	}
	if !strings.Contains(msg, id) || !strings.Contains(msg, expires) {
		c.t.Errorf("call %s answered %q: want the approval id %s and expiry %s in the text", args, msg, id, expires)
	}
	if _, err := time.Parse(time.RFC3339, expires); err != nil {
		c.t.Errorf("_meta expires_at %q: %v", expires, err)
	}
	return id
}

// ok calls with args and fails unless the call ran and returned args.
func (c retryCaller) ok(args string) {
	c.t.Helper()
	if got := mustOK(c.t, await(c.t, callAsync(c.t.Context(), c.cs, toolCall("t__echo_raw", args)))); got != args {
		c.t.Fatalf("call %s returned %q, want its arguments", args, got)
	}
}

// TestRetryMode drives retry mode end to end with a Go SDK client and the
// CLI: the first call answers "approval required" with the id in _meta;
// after an approve through the CLI the identical re-send runs once; the next
// identical re-send needs a new approval; a re-send with other arguments
// never consumes an approval. A denial is answered to the next identical
// re-send, with the reason, and the one after starts a new request.
func TestRetryMode(t *testing.T) {
	g, record := startUpstreamGateway(t, retryEchoPolicy)
	c := retryCaller{t, g.connect(t, nil, nil)}
	const a, b, d = `{"pay":"a"}`, `{"pay":"b"}`, `{"pay":"d"}`
	wantRecord := func(want ...string) {
		t.Helper()
		if got := readRecord(t, record); !slices.Equal(got, want) {
			t.Fatalf("upstream record = %q, want %q", got, want)
		}
	}
	start := time.Now()

	id1 := c.required(a, "approval required")
	if p := fetchApproval(t, g.Admin, id1); p.State != "pending" || p.Mode != "retry" {
		t.Fatalf("approval %s is %s in mode %q, want pending, retry", id1, p.State, p.Mode)
	}
	if again := c.required(a, "still pending"); again != id1 {
		t.Errorf("an identical re-send while pending answered approval %s, want the same %s", again, id1)
	}
	mustCLI(t, g.Admin, "approve", id1)
	c.ok(a)
	wantRecord("echo_raw " + a)
	if p := fetchApproval(t, g.Admin, id1); p.State != "consumed" || p.DispatchOutcome != "ok" {
		t.Errorf("approval %s: state %s, outcome %q after the re-send ran; want consumed, ok", id1, p.State, p.DispatchOutcome)
	}

	// The approval was used: the next identical call needs a new one.
	id2 := c.required(a, "approval required")
	if id2 == id1 {
		t.Fatalf("a second identical re-send reused the consumed approval %s", id1)
	}
	wantRecord("echo_raw " + a)

	// Approved, but re-sent with other arguments: a new request, and the
	// approval stays unused.
	mustCLI(t, g.Admin, "approve", id2)
	id3 := c.required(b, "approval required")
	if id3 == id2 || id3 == id1 {
		t.Fatalf("a call with other arguments answered approval %s, want a new request", id3)
	}
	if p := fetchApproval(t, g.Admin, id2); p.State != "approved" {
		t.Fatalf("approval %s is %s after a call with other arguments, want still approved", id2, p.State)
	}
	wantRecord("echo_raw " + a)
	c.ok(a) // the identical re-send consumes it
	wantRecord("echo_raw "+a, "echo_raw "+a)
	if p := fetchApproval(t, g.Admin, id3); p.State != "pending" {
		t.Errorf("approval %s (other arguments) is %s, want pending", id3, p.State)
	}

	// A denial is answered once, with its reason; then a new request.
	id4 := c.required(d, "approval required")
	mustCLI(t, g.Admin, "deny", id4, "--reason", "not this account")
	r := await(t, callAsync(t.Context(), c.cs, toolCall("t__echo_raw", d)))
	msg := mustIsError(t, r)
	if !strings.Contains(msg, "denied") || !strings.Contains(msg, "not this account") || strings.Contains(msg, "approval required") {
		t.Errorf("re-send after the denial answered %q, want the denial with its reason", msg)
	}
	if id, state, _, _ := resultApprovalMeta(t, r.res); id != id4 || state != "denied" {
		t.Errorf("denial answer carries approval %s in state %s, want %s denied", id, state, id4)
	}
	id5 := c.required(d, "approval required")
	if id5 == id4 {
		t.Errorf("the re-send after the denial was answered got the denied approval %s again", id4)
	}
	elapsed(t, "retry mode: approve, re-sends, other arguments, denial", start)
	wantRecord("echo_raw "+a, "echo_raw "+a)
}
