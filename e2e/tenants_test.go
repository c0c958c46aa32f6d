package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Principals of two tenants, acme and globex, for the tenant tests.
const (
	acmeAgentToken   = "e2e-acme-agent-token-2f61"
	globexAgentToken = "e2e-globex-agent-token-9b07"
	acmeAdminToken   = "e2e-acme-admin-token-c4d2"
	acmeAdmin2Token  = "e2e-acme-admin2-token-7e15"
)

var tenantEnv = map[string]string{
	"E2E_ACME_AGENT_TOKEN":   acmeAgentToken,
	"E2E_GLOBEX_AGENT_TOKEN": globexAgentToken,
	"E2E_ACME_ADMIN_TOKEN":   acmeAdminToken,
	"E2E_ACME_ADMIN2_TOKEN":  acmeAdmin2Token,
	"E2E_ALICE_TOKEN":        aliceToken,
	"E2E_CAROL_TOKEN":        carolToken,
}

// tenantPrincipals: an agent in each tenant, two admins of acme, and two
// deployment admins (no tenant), alice and carol.
const tenantPrincipals = `
agents:
  - { id: acme-agent, token_env: E2E_ACME_AGENT_TOKEN, tenant: acme }
  - { id: globex-agent, token_env: E2E_GLOBEX_AGENT_TOKEN, tenant: globex }
approvers:
  - { id: acme-admin, token_env: E2E_ACME_ADMIN_TOKEN, roles: [admin], tenant: acme }
  - { id: acme-admin2, token_env: E2E_ACME_ADMIN2_TOKEN, roles: [admin], tenant: acme }
  - { id: ` + aliceID + `, token_env: E2E_ALICE_TOKEN, roles: [admin] }
  - { id: ` + carolID + `, token_env: E2E_CAROL_TOKEN, roles: [admin] }
`

// tenantPolicyGated needs an approval for every call (retry mode, so a
// gated call answers at once): revision 1.
const tenantPolicyGated = `
  default: approve
  approval: {timeout: 1m, mode: retry, approvals: 1, valid_for: 1m}
`

// tenantPolicyOpen allows everything: a widening.
const tenantPolicyOpen = `
  default: allow
  approval: {timeout: 1m, mode: retry, approvals: 1, valid_for: 1m}
`

// connectWith opens an MCP session to g with token.
func connectWith(t *testing.T, g *gw, token string) *mcp.ClientSession {
	t.Helper()
	return g.connectAs(t, token)
}

// probes numbers echoRuns' calls.
var probes atomic.Int64

// echoRuns calls t__echo_raw through cs and reports whether it ran (a
// gated call answers "approval required" instead).
func echoRuns(t *testing.T, cs *mcp.ClientSession) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitFor(t))
	defer cancel()
	// Distinct arguments: an identical re-send would wait for the first.
	args := fmt.Sprintf(`{"probe":%d}`, probes.Add(1))
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t__echo_raw", Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("call t__echo_raw: %v", err)
	}
	if res.IsError && !strings.Contains(text(res), "approval required") {
		t.Fatalf("t__echo_raw: %s", text(res))
	}
	return !res.IsError
}

// TestTenantAdminCannotChangeDeploymentPolicy: with policy.source: store
// and two tenants, an admin of acme cannot change the deployment policy
// (403, narrowing or widening), so the other tenant's calls are
// unaffected; a deployment admin's widening still needs a second
// deployment admin, and acme's admins cannot see or decide it (issue 9
// item 12).
func TestTenantAdminCannotChangeDeploymentPolicy(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	cfg := `
listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }
storage: { driver: sqlite, path: ` + q(filepath.Join(dir, "toolgate.db")) + ` }
` + tenantPrincipals + upstreamServer(record) + `
policy:
  source: store` + tenantPolicyGated
	g := startGateway(t, cfg, tenantEnv)
	globex := connectWith(t, g, globexAgentToken)
	if echoRuns(t, globex) {
		t.Fatal("revision 1 gates every call; t__echo_raw ran for globex")
	}

	open := writePolicyFile(t, dir, "open.yaml", tenantPolicyOpen)
	narrow := writePolicyFile(t, dir, "narrow.yaml", "\n  default: deny\n  approval: {timeout: 1m, mode: retry, approvals: 1, valid_for: 1m}\n")
	for _, file := range []string{open, narrow} {
		r := runToolgate(t, g.Admin, acmeAdminToken, "policy", "propose", file)
		if r.Code != 1 || !strings.Contains(r.Stderr, "403 forbidden") || !strings.Contains(r.Stderr, "deployment admin") {
			t.Errorf("acme's admin proposes %s: exit %d\n%s\nwant exit 1 with 403 forbidden", filepath.Base(file), r.Code, r.Stderr)
		}
	}
	if out := mustToolgate(t, g.Admin, acmeAdminToken, "policy", "show"); !strings.Contains(out, "revision:   1\n") {
		t.Errorf("policy show:\n%s\nwant revision 1: nothing changed", out)
	}
	if echoRuns(t, globex) {
		t.Error("after acme's attempts, globex's call ran without approval")
	}

	// A deployment admin's widening waits for a second deployment admin;
	// acme's admins neither see nor decide it.
	out := mustToolgate(t, g.Admin, aliceToken, "policy", "propose", open)
	m := approvalIDRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("alice's widening proposal:\n%s\nwant an approval id", out)
	}
	id := m[1]
	if r := runToolgate(t, g.Admin, acmeAdmin2Token, "approvals", "approve", id); r.Code != 1 || !strings.Contains(r.Stderr, "404") {
		t.Errorf("acme's admin approves: exit %d\n%s\nwant exit 1 with 404", r.Code, r.Stderr)
	}
	if r := runToolgate(t, g.Admin, acmeAdmin2Token, "policy", "apply", id); r.Code != 1 || !strings.Contains(r.Stderr, "403 forbidden") {
		t.Errorf("acme's admin applies: exit %d\n%s\nwant exit 1 with 403 forbidden", r.Code, r.Stderr)
	}
	if echoRuns(t, globex) {
		t.Error("a pending proposal applied")
	}
	mustToolgate(t, g.Admin, carolToken, "approvals", "approve", id)
	var a apiApproval
	if err := json.Unmarshal([]byte(mustToolgate(t, g.Admin, aliceToken, "approvals", "show", id, "--json")), &a); err != nil || a.State != "consumed" {
		t.Errorf("approved proposal: %+v %v, want consumed (applied)", a, err)
	}
	if !echoRuns(t, globex) {
		t.Error("after the deployment admins' change, globex's call is still gated")
	}
	if !echoRuns(t, connectWith(t, g, acmeAgentToken)) {
		t.Error("after the deployment admins' change, acme's call is still gated")
	}
}
