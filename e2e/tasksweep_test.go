package e2e

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestApprovedTaskRunsWithoutPollOnPostgres (branch tasks47): the
// instance that answered with a task stops (SIGTERM); the approval goes
// through another instance on the same Postgres; with no tasks/get from
// the agent, a live instance's sweep runs the call, once, though two
// live instances look for it; the agent's later tasks/get (on either)
// reads the result.
func TestApprovedTaskRunsWithoutPollOnPostgres(t *testing.T) {
	dsn := freshPGDatabase(t, pgTestDSN(t))
	record := filepath.Join(t.TempDir(), "record.log")
	env := map[string]string{"DATABASE_URL": dsn}
	cfg := pgGatewayConfig(upstreamServer(record) + tasksPolicy)
	holder := startGateway(t, cfg, env)
	second := startGateway(t, cfg, env)
	third := startGateway(t, cfg, env)
	const args = `{"task":"orphaned"}`
	task := (&taskClient{t: t, g: holder, token: agentToken}).call("t__echo_raw", args)
	taskID := task["taskId"].(string)
	p := waitPending(t, second.Admin, 1)[0]
	holder.term(t, "holding a task")

	mustCLI(t, second.Admin, "approve", p.ID)
	waitRecord(t, record, "echo_raw "+args)
	waitState(t, second.Admin, p.ID, "consumed")
	for _, g := range []*gw{second, third} {
		done := (&taskClient{t: t, g: g, token: agentToken}).waitStatus(taskID, "completed")
		if got := taskResultText(t, done); got != args {
			t.Errorf("result through %s: %q, want %s", g.MCP, got, args)
		}
	}
	if n := countRecord(t, record, "echo_raw "+args); n != 1 {
		t.Errorf("upstream ran the call %d times, want 1", n)
	}
	found := second.stderr.String() + third.stderr.String()
	n := 0
	for _, l := range strings.Split(found, "\n") {
		if strings.Contains(l, "resuming a task whose runner is gone") && strings.Contains(l, p.ID) && strings.Contains(l, "found_by=sweep") {
			n++
		}
	}
	if n == 0 {
		t.Errorf("no live instance logged the sweep's take-over of %s:\n%s", p.ID, found)
	}
}

// TestApprovedTaskRunsAfterRestart (branch tasks47): on SQLite, the
// instance holding a task stops; the restarted instance, once the task is
// approved through it, runs the call without a tasks/get, once, and keeps
// the result for the agent's later tasks/get.
func TestApprovedTaskRunsAfterRestart(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	cfg := gatewayConfig(filepath.Join(dir, "toolgate.db"), upstreamServer(record)+tasksPolicy)
	first := startGateway(t, cfg, nil)
	const args = `{"task":"restarted"}`
	task := (&taskClient{t: t, g: first, token: agentToken}).call("t__echo_raw", args)
	taskID := task["taskId"].(string)
	p := waitPending(t, first.Admin, 1)[0]
	first.term(t, "holding a task")

	second := startGateway(t, cfg, nil)
	mustCLI(t, second.Admin, "approve", p.ID)
	waitRecord(t, record, "echo_raw "+args)
	second.waitLog(t, "resuming a task whose runner is gone", p.ID, "found_by=sweep")
	done := (&taskClient{t: t, g: second, token: agentToken}).waitStatus(taskID, "completed")
	if got := taskResultText(t, done); got != args {
		t.Errorf("result %q, want %s", got, args)
	}
	if n := countRecord(t, record, "echo_raw "+args); n != 1 {
		t.Errorf("upstream ran the call %d times, want 1", n)
	}
}
