package e2e

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// grantPolicy gates t__echo_raw in retry mode, so a call that needs an
// approval answers at once ("approval required") instead of waiting.
const grantPolicy = `
approvals:
  retry_wait: 0s
grants:
  max_ttl: 2h
policy:
  default: deny
  rules:
    - name: echo needs approval
      server: t
      tools: [echo_raw]
      effect: approve
      approval: { timeout: 5m, mode: retry }
`

var grantMade = regexp.MustCompile(`grant ([0-9a-f-]{36}): agent-1 may call t · echo_raw until \S+, at most 5 times, when args.n < 10`)

// apiGrant is the part of the admin API's grant JSON the tests read.
type apiGrant struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	Uses   int64  `json:"uses"`
	Server string `json:"server"`
	Tool   string `json:"tool"`
}

func grantAt(t *testing.T, admin, id string) apiGrant {
	t.Helper()
	var g apiGrant
	adminGet(t, admin+"/v1/grants/"+id, &g)
	return g
}

// TestGrantsTwoInstancesPostgres is issue 12's acceptance test of grants
// across instances: two gateway processes on one Postgres database; an
// approver approves a call through instance A with a grant attached
// (`toolgate approvals approve --grant`, a separate process), the agent's
// next matching calls on instance B run at once without an approval, a call
// outside the grant's predicate still needs one, and once `toolgate grants
// revoke` returned on A the very next call on B needs an approval again.
func TestGrantsTwoInstancesPostgres(t *testing.T) {
	dsn := freshPGDatabase(t, pgTestDSN(t))
	record := t.TempDir() + "/record.log"
	a := startPGGateway(t, dsn, upstreamServer(record)+grantPolicy)
	b := startPGGateway(t, dsn, upstreamServer(record)+grantPolicy)
	c := retryCaller{t: t, cs: b.connect(t, nil, nil)}

	// The first call needs an approval; the approver grants more on A.
	id := c.required(`{"n":1}`, "approval required")
	out := mustCLI(t, a.Admin, "approve", id, "--grant", "1h", "--grant-uses", "5", "--grant-when", "args.n < 10", "--reason", "small n is fine")
	m := grantMade.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("approve --grant printed %q, want the grant it made", out)
	}
	grantID := m[1]
	c.ok(`{"n":1}`) // the approved call itself, through its approval

	// On B the grant stands in for approvals of matching calls.
	before := len(approvals(t, a.Admin, "all"))
	c.ok(`{"n":2}`)
	c.ok(`{"n":3}`)
	if n := len(approvals(t, a.Admin, "all")); n != before {
		t.Errorf("granted calls made approvals (%d → %d)", before, n)
	}
	if g := grantAt(t, a.Admin, grantID); g.Uses != 2 || g.State != "active" {
		t.Errorf("grant seen through A after two uses on B: %+v", g)
	}
	// Outside its predicate, an approval is still needed.
	c.required(`{"n":50}`, "approval required")

	// Revoke on A; the next call on B is refused (needs an approval again).
	res := runToolgate(t, a.Admin, approverToken, "grants", "revoke", grantID, "--reason", "done for today")
	if res.Code != 0 || !strings.Contains(res.Stdout, grantID+": revoked by "+approverID) {
		t.Fatalf("grants revoke: exit %d\n%s%s", res.Code, res.Stdout, res.Stderr)
	}
	c.required(`{"n":4}`, "approval required")
	if g := grantAt(t, b.Admin, grantID); g.State != "revoked" || g.Uses != 2 {
		t.Errorf("grant seen through B after the revocation: %+v", g)
	}
	list := runToolgate(t, b.Admin, approverToken, "grants", "list", "--all", "--json")
	var l struct {
		Grants []apiGrant `json:"grants"`
	}
	if err := json.Unmarshal([]byte(list.Stdout), &l); list.Code != 0 || err != nil || len(l.Grants) != 1 || l.Grants[0].State != "revoked" {
		t.Errorf("grants list --all on B: exit %d, %v\n%s%s", list.Code, err, list.Stdout, list.Stderr)
	}

	// The upstream ran exactly the approved and granted calls, once each.
	want := map[string]int{`echo_raw {"n":1}`: 1, `echo_raw {"n":2}`: 1, `echo_raw {"n":3}`: 1}
	got := map[string]int{}
	for _, l := range readRecord(t, record) {
		got[l]++
	}
	for l, n := range got {
		if want[l] != n {
			t.Errorf("upstream ran %q %d times, want %d", l, n, want[l])
		}
	}
	for l, n := range want {
		if got[l] != n {
			t.Errorf("upstream ran %q %d times, want %d", l, got[l], n)
		}
	}
}
