package cli

import (
	"strings"
	"testing"
	"time"

	"toolgate/internal/api"
)

// TestWatchNamesServerAndTool: approvals watch names a call by its real
// server and tool, as list, show, the inbox and Slack do ("fs · write_file"),
// not by the agent's alias "fs__write_file" that no rule matches; a held
// prompts/get or resources/read names its prompt or resource (it printed
// "(prompt_get) " and nothing after it).
func TestWatchNamesServerAndTool(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		a    api.Approval
		want string
	}{
		{api.Approval{ID: "id1", Server: "fs", Tool: "write_file"}, "  id1  fs · write_file  "},
		{api.Approval{ID: "id2", Kind: "tool_call", Server: "fs", Tool: "write_file"}, "  id2  fs · write_file  "},
		{api.Approval{ID: "id3", Kind: "prompt_get", Server: "ev", Tool: "args-prompt"}, "  id3  ev · prompt args-prompt  "},
		{api.Approval{ID: "id4", Kind: "resource_read", Server: "docs", Tool: "file:///a.md"}, "  id4  docs · resource file:///a.md  "},
		{api.Approval{ID: "id5", Kind: "session_policy", Target: "sess-1"}, "  id5  (session_policy) sess-1  "},
	} {
		l := eventLine(api.Event{Type: "approved", At: at, Actor: "bob", Approval: &c.a})
		if !strings.Contains(l, c.want) {
			t.Errorf("watch line %q, want it to contain %q", l, c.want)
		}
		if strings.Contains(l, "__") {
			t.Errorf("watch line %q names the agent's alias", l)
		}
	}
}
