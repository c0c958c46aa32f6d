package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
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
