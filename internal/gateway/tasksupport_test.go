package gateway

import (
	"encoding/json"
	"maps"
	"testing"
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
