package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestStdioCancelReadAsTheSDK (branch attack44): a notifications/cancelled
// line naming a lean call in flight cancels it whenever the SDK would
// cancel a call of its own by that line. The SDK reads the line's members
// by their exact keys, takes a null id for a notification's, cancels on a
// "notifications/cancelled" that carries an id too (its preempter does
// not look at the id), and turns a numeric requestId into an integer
// (float64, then int64: 2.0 is 2). On 8308deeb the lean front decoded the
// line with encoding/json, which folds case and keeps the last of two
// folded keys: a line with "ID" beside no id, a folded "Method" or
// "PARAMS" or "RequestId" after the exact one, a null id, an id, or
// requestId 2.0 left the lean call running (the SDK, which does not know
// it, did nothing).
func TestStdioCancelReadAsTheSDK(t *testing.T) {
	h := newHooks()
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}}, allowAll(), nil)
	var served int
	g.leanHook = func(ok bool) {
		if ok {
			served++ // the guard's reads are one at a time
		}
	}
	a := serveRawStdio(t, g, approval.Principal{ID: "desktop", Kind: "agent"})
	t.Cleanup(func() {
		// Where a cancel was lost, a plain one ends the call, so the
		// upstream's server can close.
		for id := 10; id < 17; id++ {
			_, _ = fmt.Fprintf(a.in, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`+"\n", id)
		}
	})
	for i, tc := range []struct {
		name, line string
		answered   bool // the SDK answers the line (it has an id)
	}{
		{name: "folded ID beside no id", line: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d},"ID":9}`},
		{name: "null id", line: `{"jsonrpc":"2.0","id":null,"method":"notifications/cancelled","params":{"requestId":%d}}`},
		{name: "folded Method after method", line: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d},"Method":"ping"}`},
		{name: "folded PARAMS after params", line: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d},"PARAMS":{"requestId":999}}`},
		{name: "folded RequestId after requestId", line: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"RequestId":999}}`},
		{name: "requestId with a fraction", line: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d.0}}`},
		{name: "an id", line: `{"jsonrpc":"2.0","id":"c","method":"notifications/cancelled","params":{"requestId":%d}}`, answered: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := 10 + i
			a.t = t
			a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"up__sleep","arguments":{}}}`, id))
			select {
			case <-h.started:
			case <-time.After(testWait):
				t.Fatal("the sleep call never reached the upstream")
			}
			if served != i+1 {
				t.Fatalf("the lean front served %d of %d calls", served, i+1)
			}
			a.send(fmt.Sprintf(tc.line, id))
			select {
			case cause := <-h.ended:
				t.Logf("the lean call's upstream call ended: %v", cause)
			case <-time.After(testWait):
				t.Fatalf("%s did not cancel the lean call %d", tc.line, id)
			}
			if tc.answered {
				// Still answered by the SDK, as without the lean front.
				if under, got := a.answerOf(`"c"`); got.Error == nil {
					t.Errorf("answered under %s with %+v, want the SDK's error", under, got)
				}
			}
		})
	}
}

// TestStdioRevisionReadAsTheSDK (branch attack44): the stdin guard notes
// a session's revision from a request's _meta read by its exact keys, as
// the SDK reads it (go-sdk's internal/json: no case folding). On 8308deeb
// lineVersion decoded with encoding/json, which folds "Params", "_META" and
// "IO.MODELCONTEXTPROTOCOL/PROTOCOLVERSION" into the members it reads and
// keeps the last: a first request the SDK serves as a 2026-07-28 one was
// noted as of no revision, so a call right behind it without _meta (before
// the SDK handled the first) ran a tool that runs only as a task on the SDK
// path instead of being refused (-32021).
func TestStdioRevisionReadAsTheSDK(t *testing.T) {
	const exact = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{` + exact + `,"IO.MODELCONTEXTPROTOCOL/PROTOCOLVERSION":"2025-06-18"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{` + exact + `}},"Params":{"_meta":{"io.modelcontextprotocol/protocolVersion":""}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{` + exact + `},"_META":{"io.modelcontextprotocol/protocolVersion":""}}}`,
	} {
		l := &stdioLean{}
		if !l.revisionModern([]byte(line), []byte("tools/list")) {
			t.Errorf("a line the SDK reads as a 2026-07-28 request was not noted as one: %s", line)
		}
	}
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_META":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","Params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
	} {
		if v := lineVersion([]byte(line)); v != "" {
			t.Errorf("lineVersion read %q from %s, where the SDK reads no version", v, line)
		}
	}

	up := newTaskGapsUpstream(t, true)
	g := taskGapsGateway(t, up)
	a := serveModernStdio(t, g)
	// The first request sets the session's revision for the SDK; the
	// next follows in the same write, read by the guard before the SDK
	// has handled the first.
	a.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","arguments":{},"_meta":{` + exact + `,"IO.MODELCONTEXTPROTOCOL/PROTOCOLVERSION":"2025-06-18"}}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__solo","arguments":{}}}`)
	got := a.answers(1, 2)
	if got[1].Error != nil || got[1].Result["resultType"] != "complete" {
		t.Fatalf("the first (allowed) call: %+v", got[1])
	}
	if !isMissingTasks(got[2]) {
		t.Errorf("call without _meta sent behind the first: %+v, want -32021", got[2])
	}
	if n := up.runs.Load(); n != 1 {
		t.Errorf("the upstream ran %d calls, want 1 (the allowed echo)", n)
	}
}

// TestStdioRepeatedMembersFoldedRefused (branch attack44): a key that
// folds to a member the Tasks front reads is refused (foldedKey) in every
// copy of a repeated object, not only the last. encoding/json (the front's
// ParseMeta, ParseClientCapabilities) and the SDK's decoder both merge
// two "_meta" objects of one params, or two "sampling" objects, into one;
// foldedKey looked at the last copy only. On 8308deeb a call of up__solo
// (it runs only as a task) whose first _meta declared the Tasks extension
// under "Extensions", followed by a second "_meta", ran as a task, where
// the SDK's reading (no extension) is refused with -32021.
func TestStdioRepeatedMembersFoldedRefused(t *testing.T) {
	caps := `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":`
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__solo","arguments":{},"_meta":{` + caps + `{"Extensions":{"io.modelcontextprotocol/tasks":{}}}},"_meta":{"x":1}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__solo","arguments":{},"_meta":{` + caps + `{"sampling":{"TOOLS":{}},"sampling":{}}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__solo","arguments":{},"_meta":{` + caps + `{"extensions":{}},"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"URL":{}},"elicitation":{}}}}}`,
	} {
		if foldedKey([]byte(line)) == nil {
			t.Errorf("foldedKey passed %s", line)
		}
	}

	up := newTaskGapsUpstream(t, true)
	g := taskGapsGateway(t, up)
	a := serveModernStdio(t, g)
	a.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__solo","arguments":{},"_meta":{` + caps + `{"Extensions":{"io.modelcontextprotocol/tasks":{}}}},"_meta":{"x":1}}}`)
	if got := a.answers(1)[1]; got.Error == nil || got.Result != nil {
		t.Errorf("a task-only call whose Tasks extension the SDK does not read: %+v, want an error", got)
	}
	if n := up.runs.Load(); n != 0 {
		t.Errorf("the upstream ran %d calls, want none", n)
	}
}

// TestStdioDiscoverSetsRevision (branch attack44): server/discover with a
// 2026-07-28 _meta makes the SDK's stdio session one of that revision, also
// one initialized as 2025-11-25 before (go-sdk v1.8.0, Server.discover
// sets InitializeParams whenever the transport serves 2026-07-28). The
// stdin guard reads ahead of the SDK: a tools/call right behind the
// discover, without _meta, is served by the SDK as one of a 2026-07-28
// session. On 8308deeb the guard took no revision from server/discover and,
// once the SDK's session had one, went by it alone, so that call of
// up__solo (it runs only as a task) ran, on the lean front or the SDK
// path, where it is refused with -32021.
func TestStdioDiscoverSetsRevision(t *testing.T) {
	discover := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	if l := (&stdioLean{}); !l.revisionModern([]byte(discover), []byte("server/discover")) {
		t.Errorf("server/discover of 2026-07-28 did not set the session's revision")
	}
	up := newTaskGapsUpstream(t, true)
	g := taskGapsGateway(t, up)
	for name, a := range map[string]*rawAgent{
		"new session":        serveModernStdio(t, g),
		"2025-11-25 session": serveRawStdio(t, g, approval.Principal{ID: "desktop", Kind: "agent"}),
	} {
		a.send(discover + "\n" + `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__solo","arguments":{}}}`)
		got := a.answers(1, 2)
		if got[1].Error != nil {
			t.Fatalf("%s: server/discover: %+v", name, got[1])
		}
		if !isMissingTasks(got[2]) {
			t.Errorf("%s: a call without _meta behind server/discover: %+v, want -32021", name, got[2])
		}
	}
	if n := up.runs.Load(); n != 0 {
		t.Errorf("the upstream ran %d calls, want none", n)
	}
}

// TestStdioTaskIDsAttacked (branch attack44): tasks/get, tasks/cancel and
// tasks/update over stdio with task ids that are not the caller's (another
// principal's valid id, one with a changed character or case) or not task
// ids at all (empty, 64 KiB long, a number, null, an object, absent) are
// answered with an error, nothing else, and leave the owner's task as it
// was. This held on 8308deeb (the MAC binds the principal; the params
// decode refuses what is not a string).
func TestStdioTaskIDsAttacked(t *testing.T) {
	up := newTaskGapsUpstream(t, true)
	g := taskGapsGateway(t, up)
	owner := serveModernStdio(t, g)
	owner.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__solo","arguments":{},` + tasksCaps + `}}`)
	task, _ := owner.answers(1)[1].Result["taskId"].(string)
	if task == "" {
		t.Fatal("no task")
	}
	id := 1
	owner.taskStatus(&id, task, "completed")

	other := serveRawStdio(t, g, approval.Principal{ID: "intruder", Kind: "agent"})
	flip := []byte(task)
	flip[len(flip)-2] ^= 1
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	ids := []string{
		q(task), q(string(flip)), q(strings.ToUpper(task)), q(""), q(strings.Repeat("A", 64<<10)),
		`12345`, `null`, `{"id":` + q(task) + `}`, `[` + q(task) + `]`,
	}
	n := 100
	for _, a := range []*rawAgent{other, owner} {
		for _, method := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
			for i, tid := range append(ids, "") {
				if a == owner && i == 0 {
					continue // the owner's own task
				}
				member := `"taskId":` + tid + `,`
				if tid == "" {
					member = ""
				}
				n++
				a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s"inputResponses":{},%s}}`, n, method, member, tasksCaps))
				if got := a.answers(n)[n]; got.Error == nil || got.Result != nil {
					t.Errorf("%s with taskId %.80s: %+v, want an error", method, tid, got)
				}
			}
		}
	}
	if got := owner.taskStatus(&id, task, "completed"); got["taskId"] != task {
		t.Errorf("the owner's task after the attempts: %+v", got)
	}
	if n := up.runs.Load(); n != 1 {
		t.Errorf("the upstream ran %d calls, want 1", n)
	}
}

// TestStdioLineFramingAttacked (branch attack44): the stdin guard's
// framing against odd bytes. A UTF-8 byte order mark before a message, a
// lone CR between two messages, bytes after the object, and a NUL after it
// make the line no JSON: each is answered with one parse error (id null)
// and nothing of it runs; a CRLF line end, blank lines, a message written
// a byte at a time and invalid UTF-8 inside a string are served. The
// session goes on throughout. This held on 8308deeb.
func TestStdioLineFramingAttacked(t *testing.T) {
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}}, allowAll(), nil)
	a := serveRawStdio(t, g, approval.Principal{ID: "desktop", Kind: "agent"})
	ping := func(id int) string { return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, id) }
	lines := make(chan string, 64) // read while writing: the pipes hold nothing
	go func() {
		defer close(lines)
		for {
			line, err := a.out.ReadString('\n')
			if err != nil {
				return
			}
			lines <- line
		}
	}()
	write := func(s string) {
		if _, err := io.WriteString(a.in, s); err != nil {
			t.Fatal(err)
		}
	}
	write("\xEF\xBB\xBF" + ping(1) + "\n")
	write(ping(2) + "\r\n")
	write(ping(3) + "\r" + ping(4) + "\n")
	write(ping(5) + ` {"x":1}` + "\n")
	write(ping(6) + "\x00\n")
	write("\n\r\n \t \n")
	for _, c := range []byte(ping(7) + "\n") {
		write(string(c))
	}
	write(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"up__echo","arguments":{"s":"a` + "\xff\xfe" + `b"}}}` + "\n")
	write(ping(9) + "\n")
	answered, parseErrors := map[string]bool{}, 0
	for !answered["9"] || !answered["8"] { // the call (8) may be answered after the ping (9)
		line, ok := <-lines
		if !ok {
			t.Fatal("the output ended")
		}
		var m struct {
			ID    json.RawMessage
			Error *struct{ Code int }
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("an answer line that is no JSON: %q", line)
		}
		if string(m.ID) == "null" && m.Error != nil && m.Error.Code == -32700 {
			parseErrors++
			continue
		}
		answered[string(m.ID)] = true
	}
	if want := map[string]bool{"2": true, "7": true, "8": true, "9": true}; fmt.Sprint(answered) != fmt.Sprint(want) {
		t.Errorf("answered %v, want %v", answered, want)
	}
	if parseErrors != 4 {
		t.Errorf("%d parse errors, want 4 (BOM, lone CR, trailing bytes, NUL)", parseErrors)
	}
}

// TestLeanHTTPCancelReadAsTheSDK (branch attack44): over HTTP, a lean
// call's notifications/cancelled whose method is spelled with escapes, or
// with a folded "ID" beside no id, cancels the call, as the SDK reads such
// a POST. On 8308deeb the front's byte check missed the escaped method
// (and encoding/json read "ID" as the id): the POST went to the SDK, which
// does not know the call, and the upstream call ran on.
func TestLeanHTTPCancelReadAsTheSDK(t *testing.T) {
	f := newLeanFixture(t, &HTTPOptions{DropGrace: time.Hour})
	cs := connectHTTP(t, f.base, aliceToken, nil, nil)
	sid, version := cs.ID(), cs.InitializeResult().ProtocolVersion
	waitInitialized(t, f.g, sid)
	for i, cancel := range []string{
		`{"jsonrpc":"2.0","method":"notifications\/cancelled","params":{"requestId":%d}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d},"ID":3}`,
	} {
		id := 40 + i
		cancelLeanSleep(t, f, sid, version, id, cancel, strings.NewReader(fmt.Sprintf(cancel, id)))
	}
}

// cancelLeanSleep starts a lean up__sleep call with id on session sid,
// waits until it reached the upstream, POSTs body (a cancel, named name in
// failures) and fails the test unless the upstream call ended; it returns
// the cancel's answer once the call's own POST has returned.
func cancelLeanSleep(t *testing.T, f *leanFixture, sid, version string, id int, name string, body io.Reader) exchange {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp := sessionRequest(t, http.MethodPost, f.base, aliceToken, sid, version,
			strings.NewReader(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"up__sleep","arguments":{}}}`, id)))
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}()
	select {
	case <-f.h.started:
	case <-time.After(testWait):
		t.Fatal("the sleep call never reached the upstream")
	}
	ex, _ := sessionExchange(t, http.MethodPost, f.base, aliceToken, sid, version, body)
	select {
	case cause := <-f.h.ended:
		t.Logf("the lean call's upstream call ended: %v", cause)
	case <-time.After(testWait):
		t.Fatalf("%s did not cancel the lean call", name)
	}
	<-done
	return ex
}
