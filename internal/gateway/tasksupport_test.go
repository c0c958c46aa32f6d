package gateway

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestReadTaskSupport: execution.taskSupport is read from each raw
// tools/list page; "forbidden", unknown values, a missing execution and an
// unreadable page add nothing.
func TestReadTaskSupport(t *testing.T) {
	got := map[string]string{}
	readTaskSupport(json.RawMessage(`{"tools":[
		{"name":"a","execution":{"taskSupport":"optional"}},
		{"name":"b","execution":{"taskSupport":"required"}},
		{"name":"c","execution":{"taskSupport":"forbidden"}},
		{"name":"d","execution":{"taskSupport":"sometimes"}},
		{"name":"e"}]}`), got)
	readTaskSupport(json.RawMessage(`{"tools":[{"name":"f","execution":{"taskSupport":"optional"}}],"nextCursor":"x"}`), got)
	readTaskSupport(json.RawMessage(`{"tools":"not a list"}`), got)
	want := map[string]string{"a": TaskSupportOptional, "b": TaskSupportRequired, "f": TaskSupportOptional}
	if !maps.Equal(got, want) {
		t.Errorf("task support %v, want %v", got, want)
	}
}

// TestListSlotCapturesToolsListOnly: a list slot takes tools/list results
// (every page, in order) and nothing else; a call slot takes tools/call.
func TestListSlotCapturesToolsListOnly(t *testing.T) {
	var pages []string
	ls := slotFrom(withListSlot(t.Context(), func(raw json.RawMessage) { pages = append(pages, string(raw)) }))
	if !ls.captures("tools/list") || ls.captures("tools/call") {
		t.Errorf("list slot captures tools/list %v, tools/call %v", ls.captures("tools/list"), ls.captures("tools/call"))
	}
	if id := slotRequestID([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`), ls); string(id) != "7" {
		t.Errorf("request id of a tools/list for a list slot = %s, want 7", id)
	}
	if id := slotRequestID([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call"}`), ls); id != nil {
		t.Errorf("request id of a tools/call for a list slot = %s, want none", id)
	}
	ls.set(json.RawMessage(`{"tools":[]}`))
	ls.set(json.RawMessage(`{"tools":[{"name":"x"}]}`))
	if len(pages) != 2 || pages[1] != `{"tools":[{"name":"x"}]}` || ls.result() != nil {
		t.Errorf("pages %q, kept %s; want both pages handed on, none kept", pages, ls.result())
	}
	_, cs := withSlot(t.Context())
	if !cs.captures("tools/call") || cs.captures("tools/list") {
		t.Errorf("call slot captures tools/call %v, tools/list %v", cs.captures("tools/call"), cs.captures("tools/list"))
	}
}

// executionHandler serves h, adding execution.taskSupport "optional" to
// the tool named tool in every tools/list result it answers (JSON or
// event stream): the SDK's Tool cannot carry the field.
func executionHandler(h http.Handler, tool string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := strings.ReplaceAll(rec.Body.String(), `"name":"`+tool+`"`, `"name":"`+tool+`","execution":{"taskSupport":"optional"}`)
		maps.Copy(w.Header(), rec.Header())
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = io.WriteString(w, body)
	})
}

// TestTaskSupportOverHTTP: the task support an HTTP upstream lists reaches
// the catalog (the raw tools/list is read through the HTTP tap); a tool
// that declares none has none.
func TestTaskSupportOverHTTP(t *testing.T) {
	s := newUpstreamServer(nil)
	ts := httptest.NewServer(executionHandler(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil), "echo"))
	t.Cleanup(ts.Close)
	g := newGateway(t, []ServerConfig{{Name: "up", URL: ts.URL}}, allowAll(), nil)
	echo, ok := g.catalog.lookup("up__echo")
	if !ok {
		t.Fatalf("up__echo not in the catalog: %v", g.catalog.list())
	}
	if echo.TaskSupport != TaskSupportOptional {
		t.Errorf("up__echo task support %q, want optional", echo.TaskSupport)
	}
	for _, tl := range g.catalog.list() {
		if tl.Name != "up__echo" && tl.TaskSupport != "" {
			t.Errorf("%s has task support %q, want none", tl.Name, tl.TaskSupport)
		}
	}
}
