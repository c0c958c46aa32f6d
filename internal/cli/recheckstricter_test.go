package cli_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/cli"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// TestShowsNextSaysWhatTheRecheckDoes (review50): `approvals show`'s
// Next line of an approved call says what the dispatch re-check does. A
// policy put in force after the approval that holds the call for another
// approval (three approvals from group:finance, not one from anyone)
// invalidates it (quorum51: the re-check re-applies the quorum; on
// a2628f8c the re-sent call ran on the one approval), and so does one
// that denies it. On 0c9d0562 Next said the call is "invalidated instead
// if that policy no longer holds it for this approval"; on a11358f8 "if
// that policy ... requires approvals it no longer has", which a raised
// quorum's approval never had (review51).
func TestShowsNextSaysWhatTheRecheckDoes(t *testing.T) {
	held := policy.Approval{Timeout: time.Hour, Mode: policy.ModeRetry, Approvals: 1, ValidFor: time.Hour}
	stricter := &policy.Policy{Default: policy.Deny, Approval: held, Rules: []policy.Rule{{Name: "finance", Server: "pay", Tools: []string{"transfer"}, Effect: policy.Approve,
		Approval: &policy.Approval{Approvals: 3, Approvers: []string{"group:finance"}}}}}
	denies := &policy.Policy{Default: policy.Deny, Approval: held}
	for _, tt := range []struct {
		name  string
		later *policy.Policy
		runs  bool
	}{
		{"a policy holding it for another approval", stricter, false},
		{"a policy denying it", denies, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			holder := policy.NewHolder(&policy.Policy{Default: policy.Approve, Approval: held})
			g := gate.New(sqlitetest.Open(t), holder, &gate.Options{RetryWait: time.Nanosecond})
			srv := httptest.NewServer(api.New(g, authenticate, nil))
			t.Cleanup(srv.Close)
			e := &grantEnv{g: g, vars: map[string]string{cli.EnvAddr: srv.URL, cli.EnvToken: tokAlic}}
			id := string(e.call(t, `{"amount":12}`).ApprovalID)
			if code, out, errs := e.run(t, approvalsCmd, "approve", id); code != 0 {
				t.Fatalf("approve: exit %d\n%s%s", code, out, errs)
			}
			holder.Store(tt.later)
			const next = "(invalidated instead if that policy denies it or requires more or other approvals than it has; expired if not taken up within valid_for)"
			if code, out, errs := e.run(t, approvalsCmd, "show", id); code != 0 || !strings.Contains(out, next) {
				t.Errorf("show: exit %d, want Next: ending %q\n%s%s", code, next, out, errs)
			}
			adm := e.call(t, `{"amount":12}`)
			if adm.Allowed != tt.runs || tt.runs && adm.ApprovalID != approval.ID(id) {
				t.Fatalf("re-send under the later policy: allowed=%v (want %v), approval %q (want %q): %s", adm.Allowed, tt.runs, adm.ApprovalID, id, adm.Message)
			}
		})
	}
}
