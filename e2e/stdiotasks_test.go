package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStdioTasksBinary (branch tasks42): `toolgate serve --stdio` serves
// the Tasks front to a 2026-07-28 agent as `serve` does over HTTP
// (TestTasksForAllowedCalls): a tool whose upstream lists
// execution.taskSupport required is -32021 without the extension and
// nothing runs; with it the call is a task, tasks/get reports it, and it
// completes with the upstream's result, run once. On 602b04af the
// required tool ran as a plain call and tasks/get was an unknown method.
func TestStdioTasksBinary(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	cfg := `
storage:
  driver: sqlite
  path: ` + q(filepath.Join(dir, "toolgate.db")) + `
` + principalsYAML + `
servers:
  t:
    command: ` + q(bins.upstream) + `
    args: ["-record", ` + q(record) + `, "-task-support", "echo_raw=required"]
    env_passthrough: [GORACE]
    call_timeout: 60s
policy:
  default: allow
`
	p, _ := startStdioPeer(t, cfg)
	id := 0
	rpc := func(method, params string, tasks bool) rpcAnswer {
		t.Helper()
		id++
		caps := `{}`
		if tasks {
			caps = `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`
		}
		p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":%s}}}`, id, method, params, caps))
		for {
			a := p.next()
			if string(a.ID) == fmt.Sprint(id) {
				return a
			}
		}
	}
	const args = `{"stdio":"task"}`
	call := `"name":"t__echo_raw","arguments":` + args
	if a := rpc("tools/call", call, false); a.Error == nil || a.Error.Code != -32021 {
		t.Fatalf("required tool without the extension: %s, want -32021", a.raw)
	}
	if n := countRecord(t, record, "echo_raw "+args); n != 0 {
		t.Fatalf("the refused call ran %d times", n)
	}
	a := rpc("tools/call", call, true)
	var task struct {
		ResultType string `json:"resultType"`
		TaskID     string `json:"taskId"`
	}
	if a.Error != nil || json.Unmarshal(a.Result, &task) != nil || task.ResultType != "task" || !strings.HasPrefix(task.TaskID, "tgt_") {
		t.Fatalf("required tool with the extension: %s, want a task", a.raw)
	}
	waitRecord(t, record, "echo_raw "+args)
	// The result is recorded after the upstream answered: poll as a
	// Tasks client does.
	deadline := time.Now().Add(waitFor(t))
	for {
		g := rpc("tasks/get", fmt.Sprintf(`"taskId":%q`, task.TaskID), true)
		var st struct {
			Status string `json:"status"`
		}
		if g.Error != nil || json.Unmarshal(g.Result, &st) != nil {
			t.Fatalf("tasks/get: %s", g.raw)
		}
		if st.Status == "completed" {
			if !strings.Contains(string(g.Result), `{\"stdio\":\"task\"}`) {
				t.Errorf("completed task: %s, want the upstream's result", g.raw)
			}
			break
		}
		if st.Status != "working" || time.Now().After(deadline) {
			t.Fatalf("tasks/get: %s, want working then completed", g.raw)
		}
		time.Sleep(pollEvery)
	}
	if n := countRecord(t, record, "echo_raw "+args); n != 1 {
		t.Errorf("upstream ran the call %d times, want 1", n)
	}
}
