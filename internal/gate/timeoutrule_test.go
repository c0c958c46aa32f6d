package gate

import (
	"context"
	"errors"
	"testing"
	"time"

	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore"
)

// TestRequestRecordsItsTimeoutRule (closing21, "the per-request timeout
// rule is not stored"): with several matching approve rules a held call's
// timeout is the strictest one, which may be another rule's than the
// request's Rule (the first match). policy explain named that rule;
// approvals show could not, the request did not record it. It records it
// now (requests.timeout_rule, migration 17). On both stores.
func TestRequestRecordsItsTimeoutRule(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		p := testPolicy(time.Hour)
		p.Rules = append([]policy.Rule{
			{Name: "writes", Tools: []string{"write_*"}, Effect: policy.Approve},
			{Name: "fs within a minute", Server: "fs", Effect: policy.Approve, Approval: &policy.Approval{Timeout: time.Minute}},
		}, p.Rules...)
		f := newFixtureOn(t, db, time.Hour, nil)
		f.pol.p.Store(p)
		ctx, cancel := context.WithCancelCause(t.Context())
		ch := admitAsync(ctx, f.gate, writeCall("/timeout-rule"))
		r := waitPending(t, db, 1)[0]
		cancel(errors.New("done"))
		recv(t, ch)
		if r.Rule != "writes" || r.TimeoutRule != "fs within a minute" || r.ExpiresAt.Sub(r.CreatedAt) != time.Minute {
			t.Errorf("request of rule %q, timeout rule %q, timeout %v; want rule writes, timeout rule \"fs within a minute\", 1m", r.Rule, r.TimeoutRule, r.ExpiresAt.Sub(r.CreatedAt))
		}
	})
}
