package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/seal"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// tasksMeta is the _meta of a 2026-07-28 request; with tasks it declares
// the Tasks extension.
func tasksMeta(tasks bool) string {
	caps := `{}`
	if tasks {
		caps = `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	}
	return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}`
}

// taskLine is a 2026-07-28 request of method with params (JSON members,
// without braces) and tasksMeta(tasks).
func taskLine(id int, method, params string, tasks bool) string {
	if params != "" {
		params += ","
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s%s}}`, id, method, params, tasksMeta(tasks))
}

// rpcAnswer is a JSON-RPC answer's result and error.
type rpcAnswer struct {
	Result map[string]any `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func decodeAnswer(t *testing.T, b []byte) rpcAnswer {
	t.Helper()
	var a rpcAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("answer %s: %v", b, err)
	}
	return a
}

// TestStdioTasks: a 2026-07-28 agent over stdio that declares the Tasks
// extension gets a task for a held call, tasks/get answered from the
// store (working, then completed with the upstream's result once
// approved), -32021 for tasks/get without the extension, and not-found
// for another principal's task, as the same agent over HTTP gets them;
// tasks/cancel cancels a held call's task, and nothing of it runs. On
// 602b04af the held call was a plain held call (no task) and tasks/get
// was refused as an unknown method: the Tasks front was HTTP-only.
func TestStdioTasks(t *testing.T) {
	db := sqlitetest.Open(t)
	key, err := seal.NewKey(bytes.Repeat([]byte{7}, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	gk := gate.New(db, policy.NewHolder(&policy.Policy{
		Default:  policy.Allow,
		Approval: policy.Approval{Timeout: time.Minute, Mode: policy.ModeHold, Approvals: 1, ValidFor: time.Minute},
		Rules:    []policy.Rule{{Name: "ask-progress", Tools: []string{"progress"}, Effect: policy.Approve}},
	}), &gate.Options{Key: key})
	g := newGateway(t, []ServerConfig{rawStdioServer("up")}, gk, &Options{Tasks: gk})
	waitUpstream(t, g, "up", nil)
	base := serveHTTP(t, g, nil)
	a := serveModernStdio(t, g)
	carol := approval.Principal{ID: "carol", Kind: "human"}

	call := taskLine(1, "tools/call", `"name":"up__progress","arguments":{"k":"v"}`, true)
	a.send(call)
	held := decodeAnswer(t, []byte(a.response(1)))
	taskID, _ := held.Result["taskId"].(string)
	if held.Error != nil || held.Result["resultType"] != "task" || held.Result["status"] != "working" || !strings.HasPrefix(taskID, "tgt_") {
		t.Fatalf("held call over stdio: %+v, want a working task", held)
	}
	// The same call over HTTP (as alice) is answered the same way.
	st, h, b := modernPost(t, base, "up__progress", strings.Replace(call, `"id":1`, `"id":2`, 1), nil)
	_, b = asJSONAnswer(t, h, b)
	httpHeld := decodeAnswer(t, b)
	if st != 200 || httpHeld.Result["resultType"] != "task" {
		t.Fatalf("held call over HTTP: %d %s", st, b)
	}
	httpTask, _ := httpHeld.Result["taskId"].(string)

	get := func(id int, task string, tasks bool) rpcAnswer {
		a.send(taskLine(id, "tasks/get", fmt.Sprintf(`"taskId":%q`, task), tasks))
		return decodeAnswer(t, []byte(a.response(id)))
	}
	if got := get(3, taskID, true); got.Error != nil || got.Result["status"] != "working" || got.Result["taskId"] != taskID {
		t.Errorf("tasks/get over stdio: %+v, want working", got)
	}
	if got := get(4, taskID, false); got.Error == nil || got.Error.Code != -32021 {
		t.Errorf("tasks/get without the extension over stdio: %+v, want -32021", got)
	}
	// A task is its caller's only: alice's (HTTP) is not desktop's, and
	// desktop's is not alice's.
	if got := get(5, httpTask, true); got.Error == nil || got.Error.Code != -32602 || got.Error.Message != "task not found" {
		t.Errorf("alice's task from the stdio agent: %+v, want task not found", got)
	}
	_, h, b = modernPost(t, base, "", taskLine(6, "tasks/get", fmt.Sprintf(`"taskId":%q`, taskID), true), map[string]string{"Mcp-Method": "tasks/get", "Mcp-Name": taskID})
	_, b = asJSONAnswer(t, h, b)
	if got := decodeAnswer(t, b); got.Error == nil || got.Error.Message != "task not found" {
		t.Errorf("the stdio agent's task from alice over HTTP: %s, want task not found", b)
	}
	// alice cancels hers; then one approval is pending: desktop's.
	_, h, b = modernPost(t, base, "", taskLine(7, "tasks/cancel", fmt.Sprintf(`"taskId":%q`, httpTask), true), map[string]string{"Mcp-Method": "tasks/cancel", "Mcp-Name": httpTask})
	_, b = asJSONAnswer(t, h, b)
	if got := decodeAnswer(t, b); got.Error != nil || got.Result["resultType"] != "complete" {
		t.Fatalf("tasks/cancel over HTTP: %s", b)
	}
	id := reviewOnlyPending(t, db, gk, carol, approval.VerdictApprove)
	if o := waitOutcome(t, db, id); o != approval.OutcomeOK {
		t.Fatalf("approved task's outcome %s", o)
	}
	done := get(8, taskID, true)
	if done.Error != nil || done.Result["status"] != "completed" || done.Result["result"] == nil {
		t.Fatalf("tasks/get once approved: %+v, want completed with the result", done)
	}

	// tasks/cancel of a held call over stdio: cancelled, never run.
	a.send(taskLine(9, "tools/call", `"name":"up__progress","arguments":{"k":"w"}`, true))
	second := decodeAnswer(t, []byte(a.response(9)))
	second2, _ := second.Result["taskId"].(string)
	if second2 == "" {
		t.Fatalf("second held call: %+v", second)
	}
	a.send(taskLine(10, "tasks/cancel", fmt.Sprintf(`"taskId":%q`, second2), true))
	if got := decodeAnswer(t, []byte(a.response(10))); got.Error != nil || got.Result["resultType"] != "complete" {
		t.Errorf("tasks/cancel over stdio: %+v", got)
	}
	if got := get(11, second2, true); got.Error != nil || got.Result["status"] != "cancelled" {
		t.Errorf("tasks/get of the cancelled task: %+v, want cancelled", got)
	}
}
