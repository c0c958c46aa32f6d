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

// TestDirectTaskWaitsForItsUpstreamsInput (issue 11, SEP-2322 on a task,
// SEP-2663 tasks/update): a direct task whose upstream answers
// input_required shows input_required with the upstream's inputRequests in
// tasks/get; tasks/update for a key it did not ask is acknowledged and
// changes nothing, another principal's is not-found;
// answering the key continues the call (the next round carries the answer
// and the upstream's state, through the instance that got the update) and
// the task completes with the upstream's result. Each round ran once.
func TestDirectTaskWaitsForItsUpstreamsInput(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	servers := `
servers:
  t:
    command: ` + q(bins.upstream) + `
    args: ["-record", ` + q(record) + `, "-task-support", "ask_mrtr=optional"]
    env_passthrough: [GORACE]
    call_timeout: 60s
`
	g := startGateway(t, teamConfig(filepath.Join(dir, "toolgate.db"), servers+directTasksPolicy), teamEnv)
	caps := map[string]any{"elicitation": map[string]any{}, "extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}
	a := &taskClient{t: t, g: g, token: agentToken, caps: caps}
	other := &taskClient{t: t, g: g, token: agent2Token, caps: caps}

	const args = `{"tag":"x"}`
	taskID := a.call("t__ask_mrtr", args)["taskId"].(string)
	waiting := a.waitStatus(taskID, "input_required")
	reqs, _ := waiting["inputRequests"].(map[string]any)
	ask, _ := reqs["answer"].(map[string]any)
	if len(reqs) != 1 || ask["method"] != "elicitation/create" || !strings.Contains(fmt.Sprint(ask["params"]), "question-x") {
		t.Fatalf("input_required task's inputRequests = %v, want the upstream's question under its key", waiting["inputRequests"])
	}
	if _, ok := waiting["requestState"]; ok {
		t.Errorf("tasks/get carries a requestState: %v", waiting)
	}

	ack, e := a.rpc("tasks/update", map[string]any{"taskId": taskID, "inputResponses": map[string]any{"other": map[string]any{"action": "accept"}}}, taskID)
	if e != nil || ack["resultType"] != "complete" {
		t.Errorf("tasks/update of a key not asked: %v %v, want the ack", ack, e)
	}
	_, e = other.rpc("tasks/update", map[string]any{"taskId": taskID, "inputResponses": map[string]any{"answer": map[string]any{"action": "accept", "content": map[string]any{"answer": "stolen"}}}}, taskID)
	if e == nil || !strings.Contains(fmt.Sprint(e["message"]), "not found") {
		t.Errorf("another principal's tasks/update: %v, want task not found", e)
	}
	if res, _ := a.get(taskID); res["status"] != "input_required" {
		t.Fatalf("task after refused updates is %v, want input_required", res["status"])
	}

	ack, e = a.rpc("tasks/update", map[string]any{"taskId": taskID, "inputResponses": map[string]any{"answer": map[string]any{"action": "accept", "content": map[string]any{"answer": "42"}}}}, taskID)
	if e != nil || ack["resultType"] != "complete" || ack["status"] != nil {
		t.Fatalf("tasks/update: %v %v, want an empty ack", ack, e)
	}
	done := a.waitStatus(taskID, "completed")
	if got := taskResultText(t, done); got != "answered 42 state=up-state-x" {
		t.Errorf("completed task's result %q, want the upstream's answer to the second round with its state", got)
	}
	if n := countRecord(t, record, "ask_mrtr "+args+" asked"); n != 1 {
		t.Errorf("the first round ran %d times, want 1", n)
	}
	if n := countRecord(t, record, "ask_mrtr "+args+" answered"); n != 1 {
		t.Errorf("the answered round ran %d times, want 1", n)
	}
	if res, e := a.rpc("tasks/update", map[string]any{"taskId": taskID, "inputResponses": map[string]any{"answer": map[string]any{"action": "accept"}}}, taskID); e != nil || res["resultType"] != "complete" {
		t.Errorf("tasks/update of a finished task: %v %v, want the ack", res, e)
	}
	if n := countRecord(t, record, "ask_mrtr "+args+" answered"); n != 1 {
		t.Errorf("after an update of the finished task the round ran %d times, want 1", n)
	}
}
