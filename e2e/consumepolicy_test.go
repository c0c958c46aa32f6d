package e2e

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
)

// policyEchoHeld holds t/echo_raw for approval and denies everything
// else: revision 1 of TestConsumeUsesNewestPolicy*.
const policyEchoHeld = `
  default: deny` + policyStoreApproval + `
  rules:
    - {name: echo needs approval, server: t, tools: [echo_raw], effect: approve}
`

// consumePolicyConfig is the config of two instances with policy.source:
// store on storage (a storage: section).
func consumePolicyConfig(storage, record string) string {
	return `
listen:
  mcp: 127.0.0.1:0
  admin: 127.0.0.1:0
` + storage + policyStorePrincipals + upstreamServer(record) + `
policy:
  source: store` + policyEchoHeld
}

// revisionWithoutEvent is the SQL that stores policyEchoDenied as
// revision 2 the way no toolgate process writes it: without the
// policy_changed event and (Postgres) without the NOTIFY on
// toolgate_policy, so no instance's follower is woken; only its 2 s poll
// would find it.
const revisionWithoutEvent = `INSERT INTO policy_revisions (revision, policy, digest, created_at, created_by, approval_id, diff)
VALUES (2, $1, 'sha256:e2e-without-event', 0, 'e2e', NULL, '["echo_raw denied"]')`

// consumeUsesNewestPolicy: B holds two calls to t__echo_raw; the policy
// then moves to a revision denying it, written by insert (which the store
// announces to nobody); the first call is approved through A (B consumes
// it on its own), the second through B (its decision's transaction
// consumes it). Both consumes must see the newest revision: each call is
// refused, its approval invalidated, and the tool never runs. Before
// branch revise38 B dispatched both under revision 1 (unless its 2 s poll
// happened to fall between the insert and the consume).
func consumeUsesNewestPolicy(t *testing.T, a, b *gw, record string, insert func(ctx context.Context, policy string) error) {
	t.Helper()
	cs := b.connect(t, nil, nil)
	argss := []string{`{"consume":"approved through A"}`, `{"consume":"approved through B"}`}
	chs := make([]<-chan callResult, len(argss))
	ids := make([]string, len(argss))
	for i, args := range argss {
		chs[i] = callAsync(t.Context(), cs, toolCall("t__echo_raw", args))
		ids[i] = awaitPendingArgs(t, a.Admin, args).ID
	}
	if err := insert(t.Context(), policyEchoDenied); err != nil {
		t.Fatalf("insert revision 2: %v", err)
	}
	mustReview(t, a.Admin, ids[0], "approve", "")
	mustReview(t, b.Admin, ids[1], "approve", "")
	for i, args := range argss {
		r := await(t, chs[i])
		if r.err != nil {
			t.Fatalf("call %d: %v", i, r.err)
		}
		if !r.res.IsError || !strings.Contains(text(r.res), "invalidated") {
			t.Errorf("call %d (%s) answered %q, want refused with its approval invalidated", i, args, text(r.res))
		}
		if n := countRecord(t, record, "echo_raw "+args); n != 0 {
			t.Errorf("call %d ran %d times under a revision that denies it", i, n)
		}
		if doc := fetchApproval(t, a.Admin, ids[i]); doc.State != "invalidated" {
			t.Errorf("approval %d: state %s (%s), want invalidated", i, doc.State, doc.Reason)
		}
	}
}

// TestConsumeUsesNewestPolicyPostgres runs consumeUsesNewestPolicy on two
// instances sharing Postgres.
func TestConsumeUsesNewestPolicyPostgres(t *testing.T) {
	dsn := freshPGDatabase(t, pgTestDSN(t))
	record := filepath.Join(t.TempDir(), "record.log")
	cfg := consumePolicyConfig(`storage:
  driver: postgres
  dsn: "${DATABASE_URL}"
  max_conns: 4
`, record)
	env := map[string]string{"DATABASE_URL": dsn}
	for k, v := range policyStoreEnv {
		env[k] = v
	}
	a, b := startGateway(t, cfg, env), startGateway(t, cfg, env)
	consumeUsesNewestPolicy(t, a, b, record, func(ctx context.Context, policy string) error {
		return pgExec(ctx, dsn, strings.Replace(revisionWithoutEvent, "$1", "$p$"+policy+"$p$", 1))
	})
}

// TestConsumeUsesNewestPolicySQLite runs consumeUsesNewestPolicy on two
// instances sharing one SQLite file.
func TestConsumeUsesNewestPolicySQLite(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "shared.db")
	record := filepath.Join(dir, "record.log")
	cfg := consumePolicyConfig(`storage:
  driver: sqlite
  path: `+q(db)+"\n", record)
	a, b := startGateway(t, cfg, policyStoreEnv), startGateway(t, cfg, policyStoreEnv)
	consumeUsesNewestPolicy(t, a, b, record, func(ctx context.Context, policy string) error {
		raw, err := sql.Open("sqlite", db+"?_pragma=busy_timeout(5000)")
		if err != nil {
			return err
		}
		defer raw.Close()
		_, err = raw.ExecContext(ctx, strings.Replace(revisionWithoutEvent, "$1", "?", 1), policy)
		return err
	})
}
