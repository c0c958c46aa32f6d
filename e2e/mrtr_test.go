package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// mrtrPolicy holds t__echo_raw for approval; rounds wait at most 1s for a
// decision (approvals.max_hold) before asking again.
const mrtrPolicy = `
approvals:
  max_hold: 1s
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

// TestMultiRoundTripForHeldCalls (issue 11): a 2026-07-28 client that
// declares URL-mode elicitation but not Tasks gets input_required with a
// URL elicitation to the approval's inbox page and a requestState; its
// accept alone does not run the call (the next round asks again); a
// tampered or reused requestState is refused; after the approval the next
// round runs the call once, and its state presented again replays the
// result.
func TestMultiRoundTripForHeldCalls(t *testing.T) {
	g, record := startUpstreamGateway(t, mrtrPolicy)
	c := &taskClient{t: t, g: g, token: agentToken, caps: map[string]any{"elicitation": map[string]any{"url": map[string]any{}}}}
	const args = `{"mrtr":"one"}`
	call := func(state string) (map[string]any, map[string]any) {
		p := map[string]any{"name": "t__echo_raw", "arguments": json.RawMessage(args)}
		if state != "" {
			p["requestState"] = state
			p["inputResponses"] = map[string]any{"toolgate-approval": map[string]any{"action": "accept"}}
		}
		return c.rpc("tools/call", p, "t__echo_raw")
	}
	round := func(res, e map[string]any) (url, state string) {
		t.Helper()
		if e != nil || res["resultType"] != "input_required" {
			t.Fatalf("want input_required, got %v %v", res, e)
		}
		ir, _ := res["inputRequests"].(map[string]any)
		req, _ := ir["toolgate-approval"].(map[string]any)
		el, _ := req["params"].(map[string]any)
		url, _ = el["url"].(string)
		state, _ = res["requestState"].(string)
		if req["method"] != "elicitation/create" || el["mode"] != "url" || state == "" {
			t.Fatalf("input request %v, requestState %q: want a URL elicitation and a state", el, state)
		}
		return url, state
	}

	url, st1 := round(call(""))
	p := waitPending(t, g.Admin, 1)[0]
	if url != "https://toolgate.example/ui/approvals/"+p.ID {
		t.Errorf("elicitation URL %q, want the inbox page of %s", url, p.ID)
	}
	// The caller's accept is not an approval: the next round asks again.
	_, st2 := round(call(st1))
	if got := readRecord(t, record); len(got) != 0 {
		t.Fatalf("upstream ran %q on the caller's accept", got)
	}
	for name, bad := range map[string]string{"tampered": st2[:len(st2)-4] + "AAAA", "reused": st1} {
		if res, e := call(bad); e == nil || !strings.Contains(fmt.Sprint(e["message"]), "requestState refused") {
			t.Errorf("%s requestState: %v %v, want it refused", name, res, e)
		}
	}
	if n := len(approvals(t, g.Admin, "all")); n != 1 {
		t.Errorf("%d approvals after the rounds, want the one", n)
	}

	mustCLI(t, g.Admin, "approve", p.ID)
	res, e := call(st2)
	if e != nil || res["resultType"] != "complete" {
		t.Fatalf("round after the approval: %v %v, want the result", res, e)
	}
	if got := taskResultText(t, map[string]any{"result": res}); got != args {
		t.Errorf("result %q, want %s", got, args)
	}
	// The last state again: the recorded result, no second run.
	if again, e := call(st2); e != nil || taskResultText(t, map[string]any{"result": again}) != args {
		t.Errorf("the used state again: %v %v, want the recorded result", again, e)
	}
	if n := countRecord(t, record, "echo_raw "+args); n != 1 {
		t.Errorf("upstream ran the call %d times, want 1", n)
	}
}
