package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMultiRoundTripForHeldCallsStdio (branch mrtr42): a 2026-07-28 agent
// over `toolgate serve --stdio` (the go-sdk v1.8 client) that declares
// URL-mode elicitation gets what the same agent over HTTP gets for a held
// call (TestMultiRoundTripForHeldCalls): rounds of input_required with a
// URL elicitation to the approval's inbox page, which the client's own
// multi round-trip loop answers and re-sends; its accept is not an
// approval; once an approver (through another process on the same store)
// approves, the next round runs the call once. A round waits at most
// approvals.max_hold for the decision, so no round outlasts a client's
// request timeout.
//
// On e3242174 the stdio agent's held call got no rounds: it was answered
// the max-hold pending isError, and the client never saw the inbox page.
func TestMultiRoundTripForHeldCallsStdio(t *testing.T) {
	const policy = `
approvals:
  max_hold: 5s
  public_url: https://toolgate.example
policy:
  default: deny
  rules:
    - name: echo needs approval
      server: t
      tools: [echo_raw]
      effect: approve
      approval: { timeout: 5m }
`
	dir := t.TempDir()
	db := filepath.Join(dir, "shared.db")
	admin := startGateway(t, gatewayConfig(db, upstreamServer(filepath.Join(dir, "record-admin.log"))+policy), nil)
	record := filepath.Join(dir, "record-stdio.log")
	cmd, stderr, _ := gatewayCommand(t, `
storage:
  driver: sqlite
  path: `+q(db)+`
`+principalsYAML+upstreamServer(record)+policy, nil, "--stdio")

	var (
		mu   sync.Mutex
		urls []string
	)
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-mrtr-stdio", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			defer mu.Unlock()
			urls = append(urls, req.Params.Mode+" "+req.Params.URL)
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	})
	ctx, cancel := context.WithTimeout(t.Context(), waitFor(t))
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect to toolgate --stdio: %v\nstderr:\n%s", err, stderr)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		checkChildLog(t, "toolgate serve --stdio", stderr)
	})
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %s, want 2026-07-28", v)
	}

	const args = `{"mrtr":"stdio"}`
	ch := callAsync(ctx, cs, &mcp.CallToolParams{Name: "t__echo_raw", Arguments: json.RawMessage(args)})
	p := waitPending(t, admin.Admin, 1)[0]
	if got := readRecord(t, record); len(got) != 0 {
		t.Fatalf("upstream ran %q before the approval", got)
	}
	mustCLI(t, admin.Admin, "approve", p.ID)
	if got := mustOK(t, await(t, ch)); got != args {
		t.Errorf("result %q, want %s", got, args)
	}
	mu.Lock()
	asked := append([]string(nil), urls...)
	mu.Unlock()
	want := "url https://toolgate.example/ui/approvals/" + p.ID
	if len(asked) == 0 {
		t.Fatalf("the client was shown no URL elicitation")
	}
	for _, a := range asked {
		if a != want {
			t.Errorf("elicitation %q, want %q", a, want)
		}
	}
	if n := countRecord(t, record, "echo_raw "+args); n != 1 {
		t.Errorf("upstream ran the call %d times, want 1", n)
	}
	if n := len(approvals(t, admin.Admin, "all")); n != 1 {
		t.Errorf("%d approvals after the rounds, want the one", n)
	}
	t.Logf("rounds shown to the client: %d (%s)", len(asked), strings.Join(asked, ", "))
}
