package gateway

import (
	"encoding/json"
	"strings"
	"testing"
)

// answerOf reads lines until the answer under id or under any of the
// stray ids (an answer the agent did not ask for under that id) and
// returns it with the id it came under (its raw JSON).
func (a *rawAgent) answerOf(id string, stray ...string) (string, rpcAnswer) {
	a.t.Helper()
	for {
		line, err := a.out.ReadString('\n')
		if err != nil {
			a.t.Fatalf("read: %v (waiting for the answer to %s)", err, id)
		}
		var m struct{ ID json.RawMessage }
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		got := string(m.ID)
		if got == id || strings.Contains(strings.Join(stray, "\n")+"\n", got+"\n") {
			return got, decodeAnswer(a.t, []byte(line))
		}
	}
}

// TestStdioFoldedMembersRefused (branch attack43b): the SDK reads a line's
// members by their exact keys (go-sdk's internal/json refuses
// case-insensitive matches), the Tasks front decoded them with
// encoding/json, which folds case ("Method", "ID", "NAME", "_META",
// "Extensions" are method, id, name, _meta, extensions) and keeps the last
// of two. Each such line of a 2026-07-28 stdio session is now refused with
// an error under the id the SDK reads and runs nothing. On 804731b2: a
// line the SDK reads as tasks/get ran a tool as a task; a line with id 3
// and "ID":"zz" was answered under "zz"; a call the SDK reads as one of
// the task-only tool up__solo without the Tasks extension ("NAME", a
// folded _meta or a folded "Extensions") ran up__solo, as a task or on the
// SDK path, where the SDK's reading of it is refused with -32021.
func TestStdioFoldedMembersRefused(t *testing.T) {
	up := newTaskGapsUpstream(t, true)
	g := taskGapsGateway(t, up)
	a := serveModernStdio(t, g)
	// The session's first request (2026-07-28, Tasks declared) runs echo.
	a.send(`{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"up__echo","arguments":{},` + tasksCaps + `}}`)
	if _, got := a.answerOf("0"); got.Error != nil {
		t.Fatalf("the first call: %+v", got)
	}
	noTasks := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	for id, line := range map[string]string{
		"1": `{"jsonrpc":"2.0","id":1,"method":"tasks/get","Method":"tools/call","params":{"name":"up__echo","arguments":{},` + tasksCaps + `}}`,
		"2": `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__solo","NAME":"up__echo","arguments":{},` + noTasks + `}}`,
		"3": `{"jsonrpc":"2.0","id":3,"ID":"zz","method":"tools/call","params":{"name":"up__echo","arguments":{},` + tasksCaps + `}}`,
		"4": `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"up__solo","arguments":{},` + strings.Replace(tasksCaps, `"_meta"`, `"_META"`, 1) + `}}`,
		"5": `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"up__solo","arguments":{},` + strings.Replace(tasksCaps, `"extensions"`, `"Extensions"`, 1) + `}}`,
		"6": `{"jsonrpc":"2.0","id":6,"method":"tasks/get","params":{"taskId":"t","TASKID":"u",` + tasksCaps + `}}`,
		"7": `{"jsonrpc":"2.0","id":7,"method":"tools/call","Params":{"name":"up__echo","arguments":{},` + tasksCaps + `},"params":{"name":"up__solo","arguments":{},` + noTasks + `}}`,
	} {
		a.send(line)
		under, got := a.answerOf(id, `"zz"`)
		if under != id || got.Error == nil || got.Result != nil {
			t.Errorf("line %s: answered under %s with %+v, want an error under %s", line, under, got, id)
		}
	}
	if n := up.runs.Load(); n != 1 {
		t.Errorf("the upstream ran %d calls, want 1 (the first echo)", n)
	}
}
