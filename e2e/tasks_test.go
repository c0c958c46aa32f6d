package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tasksPolicy holds every t__echo_raw call for approval; leases are short
// so a task whose instance died is taken over quickly.
const tasksPolicy = `
approvals:
  lease: 1s
  public_url: https://toolgate.example
policy:
  default: deny
  rules:
    - name: echo needs approval
      server: t
      tools: [echo_raw]
      effect: approve
      approval: { timeout: 5m }
`

// taskClient speaks 2026-07-28 with the Tasks extension declared, as the
// agent whose token it holds.
type taskClient struct {
	t     *testing.T
	g     *gw
	token string
	id    int
	// caps are the client capabilities declared; nil: the Tasks extension.
	caps map[string]any
}

// rpc sends method with params (plus the 2026-07-28 _meta declaring
// Tasks) and returns the result, or the error object.
func (c *taskClient) rpc(method string, params map[string]any, name string) (result, rpcErr map[string]any) {
	c.t.Helper()
	c.id++
	caps := c.caps
	if caps == nil {
		caps = map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": caps,
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params})
	if err != nil {
		c.t.Fatal(err)
	}
	h := map[string]string{"Mcp-Method": method}
	if name != "" {
		h["Mcp-Name"] = name
	}
	_, msg := post2026As(c.t, c.g, c.token, h, string(body))
	result, _ = msg["result"].(map[string]any)
	rpcErr, _ = msg["error"].(map[string]any)
	if result == nil && rpcErr == nil {
		c.t.Fatalf("%s: response %v has neither result nor error", method, msg)
	}
	return result, rpcErr
}

// call makes a tools/call and fails unless it is answered with a task.
func (c *taskClient) call(tool, args string) map[string]any {
	c.t.Helper()
	res, e := c.rpc("tools/call", map[string]any{"name": tool, "arguments": json.RawMessage(args)}, tool)
	if e != nil {
		c.t.Fatalf("tools/call %s: error %v, want a task", tool, e)
	}
	if res["resultType"] != "task" || res["status"] != "working" {
		c.t.Fatalf("tools/call %s: %v, want resultType task, status working", tool, res)
	}
	if id, _ := res["taskId"].(string); !strings.HasPrefix(id, "tgt_") {
		c.t.Fatalf("task id %q, want an unguessable tgt_ token", id)
	}
	return res
}

// get is tasks/get of taskID.
func (c *taskClient) get(taskID string) (map[string]any, map[string]any) {
	c.t.Helper()
	return c.rpc("tasks/get", map[string]any{"taskId": taskID}, "")
}

// waitStatus polls tasks/get until the task has status want.
func (c *taskClient) waitStatus(taskID, want string) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(waitFor(c.t))
	for {
		res, e := c.get(taskID)
		if e != nil {
			c.t.Fatalf("tasks/get %s: %v", taskID, e)
		}
		if res["status"] == want {
			return res
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("task %s is %v after %v, want %s: %v", taskID, res["status"], waitFor(c.t), want, res)
		}
		time.Sleep(10 * pollEvery) // a person decides; no need to poll faster
	}
}

// taskResultText is the text of a completed task's result.
func taskResultText(t *testing.T, task map[string]any) string {
	t.Helper()
	r, _ := task["result"].(map[string]any)
	content, _ := r["content"].([]any)
	var b strings.Builder
	for _, c := range content {
		m, _ := c.(map[string]any)
		s, _ := m["text"].(string)
		b.WriteString(s)
	}
	return b.String()
}

// TestTasksForHeldCalls (issue 11): a 2026-07-28 client declaring Tasks
// gets a task for a held call; tasks/get says working with a status
// naming the approval and its link; another principal's tasks/get and
// tasks/cancel get not-found; approved through the CLI process, tasks/get
// returns the upstream's result and the upstream ran once. tasks/cancel
// before a decision cancels it and nothing runs; tasks/update changes
// nothing (the approval stays pending).
func TestTasksForHeldCalls(t *testing.T) {
	g, record := startTeamGateway(t, tasksPolicy)
	a := &taskClient{t: t, g: g, token: agentToken}
	other := &taskClient{t: t, g: g, token: agent2Token}
	const args = `{"task":"one"}`

	task := a.call("t__echo_raw", args)
	taskID := task["taskId"].(string)
	p := waitPending(t, g.Admin, 1)[0]
	if msg, _ := task["statusMessage"].(string); !strings.Contains(msg, "awaiting approval "+p.ID) || !strings.Contains(msg, "https://toolgate.example/ui/approvals/"+p.ID) {
		t.Errorf("statusMessage %q, want the approval %s and its inbox link", msg, p.ID)
	}
	if strings.Contains(taskID, p.ID) {
		t.Errorf("task id %q contains the approval id", taskID)
	}
	res, e := a.get(taskID)
	if e != nil || res["status"] != "working" {
		t.Fatalf("tasks/get: %v %v, want working", res, e)
	}
	// The first answer and tasks/get describe one task: a client that keeps
	// the task for the first answer's ttlMs keeps it as long as it lives.
	for _, k := range []string{"createdAt", "lastUpdatedAt", "ttlMs"} {
		if fmt.Sprint(task[k]) != fmt.Sprint(res[k]) {
			t.Errorf("%s: %v in the task's first answer, %v in tasks/get", k, task[k], res[k])
		}
	}
	for _, m := range []string{"tasks/get", "tasks/cancel"} {
		res, e := other.rpc(m, map[string]any{"taskId": taskID}, "")
		if e == nil || !strings.Contains(fmt.Sprint(e["message"]), "not found") {
			t.Errorf("another principal's %s: %v %v, want task not found", m, res, e)
		}
	}
	// Input nobody asked for is acknowledged (SEP-2663) and never used.
	if ack, e := a.rpc("tasks/update", map[string]any{"taskId": taskID, "inputResponses": map[string]any{"x": map[string]any{"action": "accept"}}}, ""); e != nil || ack["resultType"] != "complete" || ack["status"] != nil {
		t.Errorf("tasks/update: %v %v, want an empty ack", ack, e)
	}
	if st := showJSON(t, g.Admin, p.ID).State; st != "pending" {
		t.Fatalf("approval is %s after the other principal's tasks/cancel, want pending", st)
	}
	if got := readRecord(t, record); len(got) != 0 {
		t.Fatalf("upstream ran %q before the approval", got)
	}

	mustCLI(t, g.Admin, "approve", p.ID)
	done := a.waitStatus(taskID, "completed")
	if got := taskResultText(t, done); got != args {
		t.Errorf("completed task's result %q, want %s", got, args)
	}
	if again, _ := a.get(taskID); taskResultText(t, again) != args {
		t.Errorf("tasks/get again: %v", again)
	}
	if n := countRecord(t, record, "echo_raw "+args); n != 1 {
		t.Errorf("upstream ran the call %d times, want 1", n)
	}

	// Cancelled before a decision: nothing runs.
	const args2 = `{"task":"cancelled"}`
	task2 := a.call("t__echo_raw", args2)
	id2 := task2["taskId"].(string)
	p2 := waitPending(t, g.Admin, 1)[0]
	if _, e := a.rpc("tasks/cancel", map[string]any{"taskId": id2}, ""); e != nil {
		t.Fatalf("tasks/cancel: %v", e)
	}
	a.waitStatus(id2, "cancelled")
	if st := showJSON(t, g.Admin, p2.ID).State; st != "cancelled" {
		t.Errorf("approval after tasks/cancel is %s, want cancelled", st)
	}
	if r := cli(t, g.Admin, "approve", p2.ID); r.Code == 0 {
		t.Errorf("approving a cancelled task's approval succeeded: %s", r.Stdout)
	}
	if n := countRecord(t, record, "echo_raw "+args2); n != 0 {
		t.Errorf("the cancelled task's call ran %d times", n)
	}
}

// TestTaskSurvivesSIGKILLOnPostgres (issue 11): the instance that created
// a task is killed with SIGKILL; the approval goes through a second
// instance on the same Postgres, whose tasks/get runs the call (once) and
// reports it completed.
func TestTaskSurvivesSIGKILLOnPostgres(t *testing.T) {
	dsn := freshPGDatabase(t, pgTestDSN(t))
	record := filepath.Join(t.TempDir(), "record.log")
	env := map[string]string{"DATABASE_URL": dsn}
	first := startGateway(t, pgGatewayConfig(upstreamServer(record)+tasksPolicy), env)
	second := startGateway(t, pgGatewayConfig(upstreamServer(record)+tasksPolicy), env)
	const args = `{"task":"survives"}`
	task := (&taskClient{t: t, g: first, token: agentToken}).call("t__echo_raw", args)
	taskID := task["taskId"].(string)
	p := waitPending(t, second.Admin, 1)[0]
	first.kill(t)

	mustCLI(t, second.Admin, "approve", p.ID)
	b := &taskClient{t: t, g: second, token: agentToken}
	done := b.waitStatus(taskID, "completed")
	if got := taskResultText(t, done); got != args {
		t.Errorf("result through the second instance %q, want %s", got, args)
	}
	if n := countRecord(t, record, "echo_raw "+args); n != 1 {
		t.Errorf("upstream ran the call %d times, want 1", n)
	}
}
