package slack

import (
	"testing"

	"toolgate/internal/approval"
)

// TestSubjectSaysPromptOrResource: a held prompts/get or resources/read is
// announced as one ("ev · prompt args-prompt"), as approvals list and watch
// name it, not as if it were a tool of that name.
func TestSubjectSaysPromptOrResource(t *testing.T) {
	for _, c := range []struct {
		r    approval.Request
		want string
	}{
		{approval.Request{Server: "fs", Tool: "write_file"}, "fs · write_file"},
		{approval.Request{Kind: approval.KindPromptGet, Server: "ev", Tool: "args-prompt"}, "ev · prompt args-prompt"},
		{approval.Request{Kind: approval.KindResourceRead, Server: "docs", Tool: "file:///a.md"}, "docs · resource file:///a.md"},
	} {
		if got := subjectText(c.r); got != c.want {
			t.Errorf("subjectText(%s %s %s) = %q, want %q", c.r.Kind, c.r.Server, c.r.Tool, got, c.want)
		}
	}
}
