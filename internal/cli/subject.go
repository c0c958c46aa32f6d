package cli

import "toolgate/internal/api"

// subject is what an approval asks for, as list, show and watch name it:
// the real server and tool names (what rules match and the inbox shows,
// never the agent's "<server>__<tool>" alias), "prompt NAME" or "resource
// URI" for a gated prompts/get or resources/read of server, and for a
// policy change its kind in parentheses and what it changes.
func subject(a api.Approval) (server, what string) {
	switch a.Kind {
	case "", "tool_call":
		return a.Server, a.Tool
	case "prompt_get":
		return a.Server, "prompt " + a.Tool
	case "resource_read":
		return a.Server, "resource " + a.Tool
	}
	return "(" + a.Kind + ")", a.Target
}

// subjectLine is subject on one line, for watch: "fs · write_file" as the
// inbox and Slack write it, "(session_policy) <session id>" for a policy
// change.
func subjectLine(a api.Approval) string {
	server, what := subject(a)
	switch a.Kind {
	case "", "tool_call", "prompt_get", "resource_read":
		return clean(server) + " · " + clean(what)
	}
	return clean(server) + " " + clean(what)
}
