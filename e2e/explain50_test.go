package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// quorumPolicy50 holds echo_raw for three approvals from group ops
// (carol, dave, alice): agent-2, acting for alice, can never reach it.
const quorumPolicy50 = `
policy:
  default: deny
  rules:
    - name: three from ops
      server: t
      tools: [echo_raw]
      effect: approve
      approval: { timeout: 10m, approvals: 3, approvers: ["group:ops"] }
`

// TestPolicyExplainSaysQuorumRefusal (explain50): `toolgate policy
// explain`, run as a separate process against the config file and against
// the live gateway, says of agent-2's echo_raw (which the gate refuses as
// quorum_unreachable) that the gate refuses it now, in the very words the
// agent gets, in text and in the JSON field quorum, exit 0 (the effect is
// still approve); of agent-1's call that its quorum is reachable; and with
// approvals.allow_no_approvers that the approvers are not known. On
// 3eefbceb explain said only "effect: approve" for all three.
func TestPolicyExplainSaysQuorumRefusal(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	cfgText := teamConfig(filepath.Join(dir, "toolgate.db"), upstreamServer(record)+quorumPolicy50)
	cfg := filepath.Join(dir, "toolgate.yaml")
	open := filepath.Join(dir, "open.yaml")
	for path, text := range map[string]string{cfg: cfgText, open: cfgText + "approvals: { allow_no_approvers: true }\n"} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	explain := func(addr, token string, args ...string) string {
		t.Helper()
		return mustToolgate(t, addr, token, append([]string{"policy", "explain", "--server", "t", "--tool", "echo_raw"}, args...)...)
	}
	jsonQuorum := func(out string) (q struct {
		Known, Refused bool
		Code, Message  string
	}) {
		t.Helper()
		var x struct {
			Effect string
			Quorum *struct {
				Known, Refused bool
				Code, Message  string
			}
		}
		if err := json.Unmarshal([]byte(out), &x); err != nil || x.Quorum == nil || x.Effect != "approve" {
			t.Fatalf("explain --json: effect %q, quorum %+v (%v):\n%s", x.Effect, x.Quorum, err, out)
		}
		return *x.Quorum
	}

	// The agent's own refusal, from the live gateway.
	g := startGateway(t, cfgText, teamEnv)
	refusal := mustIsError(t, await(t, callAsync(t.Context(), g.connectAs(t, agent2Token), toolCall("t__echo_raw", `{}`))))
	if !strings.HasPrefix(refusal, `denied: rule "three from ops" needs 3 approvals`) {
		t.Fatalf("the agent got %q, want the quorum refusal", refusal)
	}

	for _, mode := range []struct {
		name        string
		addr, token string
		args        []string
	}{
		{"file", "", "", []string{"--config", cfg}},
		{"live", g.Admin, carolToken, []string{"--addr", g.Admin}},
	} {
		out := explain(mode.addr, mode.token, append(mode.args, "--principal", "agent-2")...)
		want := "gate:        refuses it at once (code quorum_unreachable); the agent is told: " + refusal
		if !strings.Contains(out, "effect:      approve") || !strings.Contains(out, want) {
			t.Errorf("%s: explain of agent-2's call lacks %q:\n%s", mode.name, want, out)
		}
		q := jsonQuorum(explain(mode.addr, mode.token, append(mode.args, "--principal", "agent-2", "--json")...))
		if !q.Known || !q.Refused || q.Code != "quorum_unreachable" || q.Message != refusal {
			t.Errorf("%s: --json quorum %+v, want refused with the agent's words %q", mode.name, q, refusal)
		}
		out = explain(mode.addr, mode.token, append(mode.args, "--principal", "agent-1")...)
		if !strings.Contains(out, "quorum:      reachable") || strings.Contains(out, "refuses it at once") {
			t.Errorf("%s: explain of agent-1's call:\n%s", mode.name, out)
		}
		if q := jsonQuorum(explain(mode.addr, mode.token, append(mode.args, "--principal", "agent-1", "--json")...)); !q.Known || q.Refused || q.Message != "" {
			t.Errorf("%s: --json quorum of agent-1's call %+v, want known and not refused", mode.name, q)
		}
	}

	out := explain("", "", "--config", open, "--principal", "agent-2")
	if !strings.Contains(out, "quorum:      not checked: the approvers are not known here") || strings.Contains(out, "refuses it at once") {
		t.Errorf("explain with allow_no_approvers:\n%s", out)
	}
	if q := jsonQuorum(explain("", "", "--config", open, "--principal", "agent-2", "--json")); q.Known || q.Refused {
		t.Errorf("--json quorum with allow_no_approvers %+v, want not known", q)
	}
}

// TestQuorumCompletingApproveSaysTheRecheck (explain50): the approver
// whose approval completes a 2-of-2 quorum, after a reload made the
// policy deny the call, is told (by `toolgate approvals approve`, a
// separate process) that the approval was recorded and that the re-check
// in the decision's own transaction invalidated the request, so the call
// did not run (truth51; explain50 printed "now approved (2 of 2 …); the
// call runs when its holder re-checks it", untrue once the decision
// itself consumes the held call); the agent is told so, nothing ran, and `toolgate approvals show` says what happened
// (invalidated: policy now denies the call) with no "Next:" line. On
// 3eefbceb approve printed "now approved (decided by dave); the call runs
// only if its caller is still waiting, or re-sends it".
func TestQuorumCompletingApproveSaysTheRecheck(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	rules := `
policy:
  default: deny
  rules:
    - name: two from ops
      server: t
      tools: [echo_raw]
      effect: approve
      approval: { timeout: 10m, approvals: 2, approvers: ["group:ops"] }
`
	base := teamConfig(filepath.Join(dir, "toolgate.db"), upstreamServer(record))
	g := startGateway(t, base+rules, teamEnv)
	ch := callAsync(t.Context(), g.connect(t, nil, nil), toolCall("t__echo_raw", `{"n":"recheck50"}`))
	p := awaitPendingArgs(t, g.Admin, `{"n":"recheck50"}`)
	if out := mustToolgate(t, g.Admin, carolToken, "approvals", "approve", p.ID); !strings.Contains(out, "still pending, 1 of 2 approvals") {
		t.Fatalf("carol's approve printed %q, want still pending 1 of 2", out)
	}
	if out := mustToolgate(t, g.Admin, carolToken, "approvals", "show", p.ID); strings.Contains(out, "Next:") {
		t.Errorf("show of a pending request has a Next line:\n%s", out)
	}

	g.writeConfig(t, base+strings.Replace(rules, "  rules:\n", "  rules:\n    - { name: no echo now, server: t, tools: [echo_raw], effect: deny }\n", 1))
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	g.waitLog(t, "policy reloaded", "no echo now")

	out := mustToolgate(t, g.Admin, daveToken, "approvals", "approve", p.ID)
	want := `approve recorded; approved (decided by dave), then invalidated: the call did not run (policy now denies the call (rule "no echo now"))`
	if !strings.Contains(out, want) || strings.Contains(out, "now approved") {
		t.Errorf("dave's approve printed %q, want %q", out, want)
	}
	if msg := mustIsError(t, await(t, ch)); !strings.Contains(msg, "invalidated") || !strings.Contains(msg, "policy now denies") {
		t.Fatalf("the held call got %q, want its invalidation by the policy", msg)
	}
	if got := readRecord(t, record); len(got) != 0 {
		t.Errorf("the upstream ran %q, want nothing", got)
	}
	show := mustToolgate(t, g.Admin, carolToken, "approvals", "show", p.ID)
	for _, w := range []string{"invalidated", `policy now denies the call (rule "no echo now")`, "approved by dave"} {
		if !strings.Contains(show, w) {
			t.Errorf("show after the invalidation lacks %q:\n%s", w, show)
		}
	}
	if strings.Contains(show, "Next:") {
		t.Errorf("show of an invalidated request says what comes next:\n%s", show)
	}
}
