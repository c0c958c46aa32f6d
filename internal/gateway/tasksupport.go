package gateway

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Task support of upstream tools. A tool says in tools/list whether it may
// run as a task: execution.taskSupport "forbidden" (the default),
// "optional" or "required" (the Tool field of MCP 2025-11-25, which the
// Tasks extension of 2026-07-28, SEP-2663, keeps for deciding which calls
// become tasks). The go-sdk's Tool has no execution field, so the listing
// reads it from the raw tools/list results (rawcap.go's list slot).

// Values of execution.taskSupport that make a tool task-capable.
const (
	TaskSupportOptional = "optional"
	TaskSupportRequired = "required"
)

// upstreamTools is what an upstream's tools/list gave: the definitions as
// the SDK decoded them, and the task support of each tool by real name
// (only "optional" and "required" are kept).
type upstreamTools struct {
	defs        []*mcp.Tool
	taskSupport map[string]string
}

// readTaskSupport adds the task support each tool of one raw tools/list
// result declares to into. A result it cannot read adds nothing: such
// tools are not run as tasks (the SDK reports a malformed list itself).
func readTaskSupport(raw json.RawMessage, into map[string]string) {
	var page struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution *struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}
	if json.Unmarshal(raw, &page) != nil {
		return
	}
	for _, t := range page.Tools {
		if t.Execution == nil {
			continue
		}
		switch t.Execution.TaskSupport {
		case TaskSupportOptional, TaskSupportRequired:
			into[t.Name] = t.Execution.TaskSupport
		}
	}
}
