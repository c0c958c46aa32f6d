package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"toolgate/internal/api"
	"toolgate/internal/cli"
	"toolgate/internal/config"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// TestExplainQuorumMatchesTheGate (review50): for one config, `policy
// explain --config` (the CLI's roster: the approvers of the file) and
// the admin API's explain (the gate's own roster) say of each agent's
// call what a gate built as serve builds it (reviewers over the config's
// tokens) does with it: refused as quorum_unreachable in the same words,
// or held; and "not known" exactly when the gate's roster is nil
// (approvals.allow_no_approvers). The inputs cover groups, tenants,
// on_behalf_of, two approve rules matching one call (their approvals
// combined), the policy's default and allow_no_approvers.
func TestExplainQuorumMatchesTheGate(t *testing.T) {
	tok := func(id string) string { return config.TokenHash("review50-token-of-" + id) }
	people := fmt.Sprintf(`
agents:
  - { id: agent-1, token_sha256: %s }
  - { id: agent-2, token_sha256: %s, on_behalf_of: alice }
  - { id: agent-3, token_sha256: %s, tenant: acme }
  - { id: agent-4, token_sha256: %s, tenant: acme, on_behalf_of: ann }
approvers:
  - { id: alice, token_sha256: %s, roles: [approver], groups: [ops] }
  - { id: carol, token_sha256: %s, roles: [approver], groups: [ops] }
  - { id: dave, token_sha256: %s, roles: [admin], groups: [ops, finance] }
  - { id: vera, token_sha256: %s, roles: [viewer], groups: [ops] }
  - { id: ann, token_sha256: %s, roles: [approver], groups: [finance], tenant: acme }
  - { id: gus, token_sha256: %s, roles: [approver], groups: [finance], tenant: globex }
`, tok("agent-1"), tok("agent-2"), tok("agent-3"), tok("agent-4"), tok("alice"), tok("carol"), tok("dave"), tok("vera"), tok("ann"), tok("gus"))
	head := "listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }\nstorage: { path: DB }\n" + people + `servers:
  t: { url: "http://127.0.0.1:9/mcp" }
policy:
  default: approve
  approval: { timeout: 10m, mode: retry }
  rules:
    - name: three from ops
      server: t
      tools: [deploy]
      effect: approve
      approval: { approvals: 3, approvers: ["group:ops"] }
    - name: two from finance
      server: t
      tools: [pay, deploy]
      effect: approve
      approval: { approvals: 2, approvers: ["group:finance", "group:ops"] }
    - name: reads
      server: t
      tools: [read]
      effect: allow
`
	tools := []string{"deploy", "pay", "read", "write"}
	agents := []string{"agent-1", "agent-2", "agent-3", "agent-4"}
	for _, mode := range []struct{ name, extra string }{
		{"approvers known", ""},
		{"allow_no_approvers", "approvals: { allow_no_approvers: true }\n"},
	} {
		path := writeConfig(t, head+mode.extra)
		cfg, err := config.LoadFile(path, nil)
		if err != nil {
			t.Fatalf("%s: %v", mode.name, err)
		}
		creds, err := cfg.Tokens(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		roster := reviewers(cfg, creds, false)
		holder := policy.NewHolder(&cfg.Policy)
		g := gate.New(sqlitetest.Open(t), holder, &gate.Options{Reviewers: roster})
		live := &liveExplainer{holder: holder, cfg: cfg, ann: func(string, string) *policy.Annotations { return nil }, quorum: g.ExplainQuorum}
		refusedSome, heldSome := false, false
		for _, agent := range agents {
			for _, tool := range tools {
				name := fmt.Sprintf("%s/%s/%s", mode.name, agent, tool)
				adm := g.Admit(t.Context(), gate.Call{Principal: creds[tok(agent)].Principal, Server: "t", Tool: tool, Arguments: json.RawMessage(`{}`)})
				refused := adm.Code == gate.CodeQuorumUnreachable
				refusedSome = refusedSome || refused
				held := !adm.Allowed && adm.ApprovalID != "" // retry mode: a pending request, answered at once
				heldSome = heldSome || held

				var out, errOut strings.Builder
				args := []string{"--config", path, "--server", "t", "--tool", tool, "--principal", agent, "--json"}
				if code := cli.RunExplain(context.Background(), args, &out, &errOut, nil); code != 0 {
					t.Fatalf("%s: policy explain exit %d: %s", name, code, errOut.String())
				}
				var file policy.Explanation
				if err := json.Unmarshal([]byte(out.String()), &file); err != nil {
					t.Fatalf("%s: %v\n%s", name, err, out.String())
				}
				api, err := live.Explain(t.Context(), api.ExplainBody{Server: "t", Tool: tool, Principal: agent})
				if err != nil {
					t.Fatal(err)
				}
				// The words say what the gate did: held (review50: with
				// allow_no_approvers they said it refuses the call at once
				// if too few approvers may review it; it never checks).
				out.Reset()
				if code := cli.RunExplain(context.Background(), args[:len(args)-1], &out, &errOut, nil); code != 0 {
					t.Fatalf("%s: policy explain exit %d: %s", name, code, errOut.String())
				}
				if text := out.String(); file.Quorum != nil && !refused && strings.Contains(text, "refuses") {
					t.Errorf("%s: the gate held the call, policy explain says:\n%s", name, text)
				}
				for where, x := range map[string]policy.Explanation{"--config": file, "admin API": api} {
					q := x.Quorum
					switch {
					case x.Effect != policy.Approve:
						if q != nil || refused {
							t.Errorf("%s (%s): effect %s, quorum %+v, gate %+v", name, where, x.Effect, q, adm)
						}
					case q == nil:
						t.Errorf("%s (%s): held for approval, no quorum answer (gate %+v)", name, where, adm)
					case q.Known != (roster != nil):
						t.Errorf("%s (%s): quorum known=%v, the gate's roster %v", name, where, q.Known, roster)
					case q.Refused != refused || q.Message != adm.Message && refused:
						t.Errorf("%s (%s): explain says refused=%v %q; the gate: code %q %q", name, where, q.Refused, q.Message, adm.Code, adm.Message)
					case !refused && !held:
						t.Errorf("%s: not refused by quorum, yet not held: %+v", name, adm)
					}
				}
			}
		}
		if mode.extra == "" && (!refusedSome || !heldSome) {
			t.Errorf("%s: the inputs refused some=%v, held some=%v; want both", mode.name, refusedSome, heldSome)
		}
	}
}
