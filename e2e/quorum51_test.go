package e2e

import (
	"maps"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReloadRaisingTheQuorumInvalidatesTheApproval (quorum51): a rule
// raised from one approver to two by a config reload (SIGHUP) takes
// effect for the call already held: carol's approval settles the request
// (it was made needing one), but the dispatch re-check counts it against
// the quorum in force, so the call is not run, carol's approve says so,
// the agent is told why and that a re-send asks again, and `approvals
// show` prints the reason. The
// re-send makes a request needing two. On a2628f8c the upstream ran on
// carol's approval alone.
func TestReloadRaisingTheQuorumInvalidatesTheApproval(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { reloadRaisingTheQuorum(t, "") })
	t.Run("postgres", func(t *testing.T) {
		reloadRaisingTheQuorum(t, freshPGDatabase(t, pgTestDSN(t)))
	})
}

// reloadRaisingTheQuorum is TestReloadRaisingTheQuorumInvalidatesTheApproval
// on a SQLite file (dsn "") or on the Postgres database dsn.
func reloadRaisingTheQuorum(t *testing.T, dsn string) {
	t.Helper()
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	rules := `
policy:
  default: deny
  rules:
    - name: ops approve
      server: t
      tools: [echo_raw]
      effect: approve
      approval: { timeout: 10m, approvals: 1, approvers: ["group:ops"] }
`
	db := filepath.Join(dir, "toolgate.db")
	base := teamConfig(db, upstreamServer(record))
	env := maps.Clone(teamEnv)
	if dsn != "" {
		base = strings.Replace(base, "driver: sqlite\n  path: "+q(db), `driver: postgres
  dsn: "${DATABASE_URL}"
  max_conns: 4`, 1)
		env["DATABASE_URL"] = dsn
		if !strings.Contains(base, "driver: postgres") {
			t.Fatal("the team config's storage was not replaced by Postgres")
		}
	}
	g := startGateway(t, base+rules, env)
	agent := g.connect(t, nil, nil)
	ch := callAsync(t.Context(), agent, toolCall("t__echo_raw", `{"n":"quorum51"}`))
	p := awaitPendingArgs(t, g.Admin, `{"n":"quorum51"}`)

	g.writeConfig(t, base+strings.Replace(rules, "approvals: 1,", "approvals: 2,", 1))
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	g.waitLog(t, "policy reloaded")

	const reason = `policy now requires 2 approvals from group:ops (rule "ops approve"); 1 of its approvals qualifies`
	// Her approval's own transaction consumed the call held in serve and
	// invalidated it: she is told so (truth51; a7b144b1 printed "now
	// approved (1 of 1 …); the call runs when its holder re-checks it").
	// The decision was recorded: exit 0.
	if out := mustToolgate(t, g.Admin, carolToken, "approvals", "approve", p.ID); !strings.Contains(out, "approve recorded; approved (decided by carol), then invalidated: the call did not run ("+reason+")") || strings.Contains(out, "now approved") {
		t.Fatalf("carol's approve printed %q, want the request invalidated by the raised quorum", out)
	}
	if msg := mustIsError(t, await(t, ch)); !strings.Contains(msg, "approval invalidated: "+reason) || !strings.Contains(msg, "Re-send to request a new approval") {
		t.Fatalf("the held call got %q, want its invalidation by the raised quorum", msg)
	}
	if got := readRecord(t, record); len(got) != 0 {
		t.Errorf("the upstream ran %q, want nothing", got)
	}
	show := mustToolgate(t, g.Admin, carolToken, "approvals", "show", p.ID)
	for _, w := range []string{"invalidated", reason} {
		if !strings.Contains(show, w) {
			t.Errorf("show after the invalidation lacks %q:\n%s", w, show)
		}
	}

	ch = callAsync(t.Context(), agent, toolCall("t__echo_raw", `{"n":"quorum51"}`))
	again := awaitPendingArgs(t, g.Admin, `{"n":"quorum51"}`)
	if again.ID == p.ID || again.RequiredApprovals != 2 {
		t.Fatalf("the re-send's request %s needs %d approvals, want a new one needing 2", again.ID, again.RequiredApprovals)
	}
	_ = ch
}
