package e2e

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// bigEchoRule is noGrantsPolicy's rule forbidding grants for big echoes,
// added to grantPolicy by a reload.
const bigEchoRule = `
    - name: every big echo is approved on its own
      server: t
      tools: [echo_raw]
      when: args.n >= 100
      effect: approve
      approval: { timeout: 5m, mode: retry, grants: false }
`

// TestGrantsFollowAReloadCLI (branch grants51), `toolgate serve` and the
// CLI as processes, SQLite file: (1) a big call held while the policy
// allowed grants takes no grant terms once a reload (SIGHUP) added a rule
// saying grants: false for big calls (exit 1, nothing recorded), though its
// request, held before, does not record it; (2) grants.enabled: false
// takes effect on a reload (logged, no restart warning), and true again on
// the next, after which a new call takes grant terms and the grant admits
// the next call. On a2628f8c the first approve --grant made a grant and
// the reload of grants.enabled warned that it needs a restart.
func TestGrantsFollowAReloadCLI(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	start := gatewayConfig(filepath.Join(dir, "tg.db"), upstreamServer(record)+grantPolicy)
	g := startGateway(t, start, nil)
	c := retryCaller{t: t, cs: g.connect(t, nil, nil)}
	reload := func(text string, logParts ...string) {
		t.Helper()
		g.writeConfig(t, text)
		if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		g.waitLog(t, logParts...)
	}

	big := c.required(`{"n":50000}`, "approval required")
	reload(start+bigEchoRule, "policy reloaded", "every big echo")
	res := cli(t, g.Admin, "approve", big, "--grant", "1h", "--grant-when", "args.n > 10")
	if res.Code != 1 || !strings.Contains(res.Stderr, "grants: false") || !strings.Contains(res.Stderr, "every big echo is approved on its own") {
		t.Fatalf("approve --grant of a call held before the policy said grants: false: exit %d\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, res.Stderr)
	}
	var a apiApproval
	adminGet(t, g.Admin+"/v1/approvals/"+big, &a)
	if a.State != "pending" {
		t.Errorf("after the refused approve --grant the approval is %s, want pending", a.State)
	}
	if list := runToolgate(t, g.Admin, approverToken, "grants", "list", "--all"); list.Code != 0 || strings.Contains(list.Stdout, "echo_raw") {
		t.Errorf("grants list --all: exit %d, want no grant\n%s%s", list.Code, list.Stdout, list.Stderr)
	}
	mustCLI(t, g.Admin, "approve", big)
	c.ok(`{"n":50000}`)

	off := strings.Replace(start, "  max_ttl: 2h\n", "  max_ttl: 2h\n  enabled: false\n", 1)
	reload(off, "grants.enabled reloaded", "enabled=false")
	small := c.required(`{"n":1}`, "approval required")
	res = cli(t, g.Admin, "approve", small, "--grant", "1h")
	if res.Code != 1 || !strings.Contains(res.Stderr, "grants.enabled: false") {
		t.Fatalf("approve --grant after grants.enabled: false was reloaded: exit %d\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, res.Stderr)
	}
	if strings.Contains(g.stderr.String(), "take effect only after a restart") {
		t.Errorf("the reload of grants.enabled warned that it needs a restart:\n%s", g.stderr.String())
	}

	reload(start, "grants.enabled reloaded", "enabled=true")
	mustCLI(t, g.Admin, "approve", small) // held while grants were off: no terms
	c.ok(`{"n":1}`)
	next := c.required(`{"n":2}`, "approval required")
	mustCLI(t, g.Admin, "approve", next, "--grant", "1h", "--grant-when", "args.n < 10")
	c.ok(`{"n":2}`)
	c.ok(`{"n":3}`) // through the grant
}
