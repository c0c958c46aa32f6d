package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// directTasksPolicy allows everything; leases are short so that a cancel
// made through another instance would be seen quickly.
const directTasksPolicy = `
approvals:
  lease: 1s
policy:
  default: allow
`

// TestTasksForAllowedCalls (issue 11, SEP-2663): a 2026-07-28 client that
// declares the Tasks extension gets a task for an allowed call to a tool
// whose upstream lists execution.taskSupport (optional or required);
// tasks/get reports working, then completed with the upstream's result
// (run once); a tool without task support answers at once; a required
// tool without the extension is -32021 and nothing runs; another
// principal's tasks/get is not-found; a Mcp-Name that names another task
// is -32020; tasks/cancel acknowledges, cancels the upstream call and the
// task settles cancelled; tasks/update is acknowledged and changes nothing.
func TestTasksForAllowedCalls(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	servers := `
servers:
  t:
    command: ` + q(bins.upstream) + `
    args: ["-record", ` + q(record) + `, "-task-support", "slow=optional,echo_raw=required"]
    env_passthrough: [GORACE]
    call_timeout: 60s
`
	g := startGateway(t, teamConfig(filepath.Join(dir, "toolgate.db"), servers+directTasksPolicy), teamEnv)
	a := &taskClient{t: t, g: g, token: agentToken}
	other := &taskClient{t: t, g: g, token: agent2Token}
	plain := &taskClient{t: t, g: g, token: agentToken, caps: map[string]any{}}

	// A tool without task support runs at once, even for a Tasks client.
	res, e := a.rpc("tools/call", map[string]any{"name": "t__big_result", "arguments": map[string]any{}}, "t__big_result")
	if e != nil || res["resultType"] != "complete" || res["taskId"] != nil {
		t.Fatalf("call of a tool without task support: %v %v, want a complete result", res, e)
	}

	// A required tool, without the extension: -32021, nothing runs.
	const args = `{"direct":"one"}`
	_, e = plain.rpc("tools/call", map[string]any{"name": "t__echo_raw", "arguments": json.RawMessage(args)}, "t__echo_raw")
	if code, _ := e["code"].(float64); code != -32021 || !strings.Contains(fmt.Sprint(e["data"]), "io.modelcontextprotocol/tasks") {
		t.Fatalf("required tool without the extension: %v, want -32021 naming the extension", e)
	}
	_, e = plain.rpc("tools/call", map[string]any{"name": "t__echo_raw", "arguments": json.RawMessage(args)}, "t__slow")
	if code, _ := e["code"].(float64); code != -32020 {
		t.Errorf("required tool without the extension, Mcp-Name of another tool: %v, want -32020 first", e)
	}
	if n := countRecord(t, record, "echo_raw "+args); n != 0 {
		t.Fatalf("the refused call ran %d times", n)
	}

	// With it: a task, completed with the upstream's result, run once.
	task := a.call("t__echo_raw", args)
	taskID := task["taskId"].(string)
	for _, k := range []string{"ttlMs", "pollIntervalMs", "createdAt", "lastUpdatedAt"} {
		if task[k] == nil {
			t.Errorf("CreateTaskResult lacks %s: %v", k, task)
		}
	}
	if _, e := other.get(taskID); e == nil || !strings.Contains(fmt.Sprint(e["message"]), "not found") {
		t.Errorf("another principal's tasks/get: %v, want task not found", e)
	}
	done := a.waitStatus(taskID, "completed")
	if got := taskResultText(t, done); got != args {
		t.Errorf("completed task's result %q, want %s", got, args)
	}
	if n := countRecord(t, record, "echo_raw "+args); n != 1 {
		t.Errorf("upstream ran the call %d times, want 1", n)
	}
	if _, e := a.rpc("tasks/get", map[string]any{"taskId": taskID}, "tgt_another"); e == nil || e["code"] != float64(-32020) {
		t.Errorf("tasks/get with Mcp-Name of another task: %v, want -32020", e)
	}

	// Cancelled while running: the upstream call is cancelled.
	const slowArgs = `{"seconds":0}`
	slow := a.call("t__slow", slowArgs)
	slowID := slow["taskId"].(string)
	waitRecord(t, record, "slow started "+slowArgs)
	ack, e := a.rpc("tasks/update", map[string]any{"taskId": slowID, "inputResponses": map[string]any{"x": map[string]any{"action": "accept"}}}, slowID)
	if e != nil || ack["resultType"] != "complete" || ack["status"] != nil {
		t.Errorf("tasks/update: %v %v, want an empty ack", ack, e)
	}
	if res, _ := a.get(slowID); res["status"] != "working" {
		t.Errorf("task after tasks/update is %v, want working", res["status"])
	}
	ack, e = a.rpc("tasks/cancel", map[string]any{"taskId": slowID}, slowID)
	if e != nil || ack["resultType"] != "complete" || ack["taskId"] != nil {
		t.Fatalf("tasks/cancel: %v %v, want an empty ack", ack, e)
	}
	waitRecord(t, record, "slow cancelled "+slowArgs)
	a.waitStatus(slowID, "cancelled")
	if ack, e := a.rpc("tasks/cancel", map[string]any{"taskId": slowID}, slowID); e != nil || ack["resultType"] != "complete" {
		t.Errorf("tasks/cancel of a cancelled task: %v %v, want the same ack", ack, e)
	}
}
