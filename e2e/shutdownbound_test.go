package e2e

import (
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hangPolicy holds t__hang (an upstream tool that never returns, even when
// cancelled) for a human.
const hangPolicy = `
policy:
  default: deny
  rules:
    - name: hang needs approval
      server: t
      tools: [hang]
      effect: approve
      approval: { timeout: 1m }
`

// TestSIGTERMBoundedWithStuckUpstream stops `toolgate serve` with SIGTERM
// while an approved call is in dispatch to an upstream tool that never
// returns, cancelled or not: the process exits cleanly (the call is
// cancelled at Close; the test only checks that it exits before waitFor)
// and the approval ends consumed with the outcome cancelled_after_dispatch
// recorded, not lost. It passes on the base too (branch ops38 found that
// this path was bounded already); it pins what the store keeps.
func TestSIGTERMBoundedWithStuckUpstream(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "shared.db")
	record := filepath.Join(dir, "record.log")
	g := startGateway(t, gatewayConfig(db, upstreamServer(record)+hangPolicy), nil)
	cs := g.connect(t, nil, nil)
	ch := callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "t__hang", Arguments: json.RawMessage(`{"n":1}`)})
	p := waitPending(t, g.Admin, 1)[0]
	postVerdict(t, g.Admin, approverToken, p.ID, "approve", nil)
	waitRecord(t, record, `hang started {"n":1}`)
	t.Logf("exited %v after SIGTERM", g.term(t, "with a call stuck upstream"))
	if r := await(t, ch); r.err == nil && !r.res.IsError {
		t.Errorf("the call cut off by the shutdown succeeded: %q", text(r.res))
	}
	admin := startGateway(t, gatewayConfig(db, upstreamServer(filepath.Join(dir, "record2.log"))+hangPolicy), nil)
	if a := showJSON(t, admin.Admin, p.ID); a.State != "consumed" || a.DispatchOutcome != "cancelled_after_dispatch" {
		t.Errorf("approval %s is %s with outcome %q after the shutdown, want consumed with cancelled_after_dispatch", p.ID, a.State, a.DispatchOutcome)
	}
}

// TestSIGTERMBoundedWithFrozenStore stops `toolgate serve` on Postgres
// with SIGTERM after its database stopped answering (connections open,
// nothing relayed) while a call was held: the process exits with status 1
// once its shutdown overran its bound (15 s; the test only checks that it
// exits before waitFor), and its last line says so, naming the step it
// was at: closing the store (shut39: before, the step named the upstreams,
// tracing and the store together). On the base of ops38 it logged
// "stopped" and then never exited (the store's Close waited on the frozen
// connections).
func TestSIGTERMBoundedWithFrozenStore(t *testing.T) {
	dsn := freshPGDatabase(t, pgTestDSN(t))
	fz, via := startPGFreeze(t, dsn)
	dir := t.TempDir()
	g := startGatewayExit(t, bins.toolgate, pgGatewayConfig(upstreamServer(filepath.Join(dir, "record.log"))+hangPolicy), map[string]string{"DATABASE_URL": via}, exitAny)
	cs := g.connect(t, nil, nil)
	_ = callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "t__hang", Arguments: json.RawMessage(`{"n":2}`)})
	waitPending(t, g.Admin, 1)
	fz.freeze()
	t.Logf("exited %v after SIGTERM: %v", g.term(t, "with its database frozen"), g.exitErr())
	line := g.waitLog(t, "shutdown did not finish within its bound", "step=")
	t.Logf("%s", line)
	if !strings.Contains(line, `step="closing the store"`) {
		t.Errorf("the overrun's line does not name the store's close as its step:\n%s", line)
	}
	var xe *exec.ExitError
	if err := g.exitErr(); !errors.As(err, &xe) || xe.ExitCode() != 1 {
		t.Errorf("toolgate serve exited with %v after its shutdown overran its bound, want status 1", err)
	}
}
