// Command tasksfixture is the MCP server behind toolgate in the Tasks
// extension scenarios (tasks-*) of the conformance suite run by
// e2e/conformance/run.sh: it has the tools those scenarios call, which the
// Go SDK's everything-server lacks, and declares their task support in
// tools/list (execution.taskSupport, the MCP 2025-11-25 Tool field the
// Tasks extension keeps). It is a plain MCP server over stdio: it runs
// every call at once, as a 2025-11-25 server does for a call that is not
// task-augmented; the tasks are toolgate's (docs/protocol.md).
//
// Tools (execution.taskSupport in brackets):
//
//   - greet {"name"} [none]: "Hello, <name>!".
//   - slow_compute {"seconds","label"} [optional]: waits seconds (until
//     its call is cancelled), then "computed <label> in <seconds>s".
//   - failing_job [required]: a tool execution error (isError).
//   - protocol_error_job [optional]: a JSON-RPC error (internal error).
//   - confirm_delete {"filename"} [optional]: asks its client to confirm
//     (form elicitation, as a multi round-trip input request), then
//     "deleted <filename>" or "kept <filename>".
//   - multi_input [optional]: asks two questions at once (input requests
//     "first" and "second").
//   - test_tool_with_task [required]: asks for user_name (input request),
//     then "Hello, <user_name>!".
//
// The questions are SEP-2322 input requests (input_required): a 2026-07-28
// client (toolgate's session for 2026 agents) gets them as they are, and
// the SDK puts them to a 2025-era client as elicitation/create requests.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/e2e/internal/taskexec"
)

// taskSupport is the execution.taskSupport each tool declares.
var taskSupport = map[string]string{
	"slow_compute":        "optional",
	"failing_job":         "required",
	"protocol_error_job":  "optional",
	"confirm_delete":      "optional",
	"multi_input":         "optional",
	"test_tool_with_task": "required",
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newServer().Run(ctx, taskexec.Transport(&mcp.StdioTransport{}, taskSupport))
	stop()
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "tasksfixture:", err)
		os.Exit(1)
	}
}

func newServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "tasksfixture", Version: "1"}, nil)
	object := func(props map[string]any) map[string]any {
		if props == nil {
			return map[string]any{"type": "object"}
		}
		return map[string]any{"type": "object", "properties": props}
	}
	str := map[string]any{"type": "string"}
	s.AddTool(&mcp.Tool{Name: "greet", Description: "Greets name (runs at once).", InputSchema: object(map[string]any{"name": str})},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct{ Name string }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			return text(fmt.Sprintf("Hello, %s!", in.Name)), nil
		})
	s.AddTool(&mcp.Tool{Name: "slow_compute", Description: "Waits seconds, then returns (task support optional).", InputSchema: object(map[string]any{"seconds": map[string]any{"type": "number"}, "label": str})},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct {
				Seconds float64
				Label   string
			}
			_ = json.Unmarshal(req.Params.Arguments, &in)
			t := time.NewTimer(time.Duration(in.Seconds * float64(time.Second)))
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return text(fmt.Sprintf("computed %s in %gs", in.Label, in.Seconds)), nil
		})
	s.AddTool(&mcp.Tool{Name: "failing_job", Description: "Always fails with a tool error (task support required).", InputSchema: object(nil)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			r := text("failing_job failed, as it always does")
			r.IsError = true
			return r, nil
		})
	s.AddTool(&mcp.Tool{Name: "protocol_error_job", Description: "Always fails with a JSON-RPC error (task support optional).", InputSchema: object(nil)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "protocol_error_job: internal failure"}
		})
	s.AddTool(&mcp.Tool{Name: "confirm_delete", Description: "Asks its client to confirm deleting filename (task support optional).", InputSchema: object(map[string]any{"filename": str})},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct{ Filename string }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			res, ok := answer(req, "confirm")
			if !ok {
				return ask(map[string]*mcp.ElicitParams{"confirm": question("Delete "+in.Filename+"?", "confirm", "boolean")}), nil
			}
			if res.Action == "accept" && res.Content["confirm"] == true {
				return text("deleted " + in.Filename), nil
			}
			return text("kept " + in.Filename), nil
		})
	s.AddTool(&mcp.Tool{Name: "multi_input", Description: "Asks its client two questions at once (task support optional).", InputSchema: object(nil)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			first, ok1 := answer(req, "first")
			second, ok2 := answer(req, "second")
			if !ok1 || !ok2 {
				return ask(map[string]*mcp.ElicitParams{"first": question("First name?", "name", "string"), "second": question("Second name?", "name", "string")}), nil
			}
			return text(fmt.Sprintf("got [%v %v]", first.Content["name"], second.Content["name"])), nil
		})
	s.AddTool(&mcp.Tool{Name: "test_tool_with_task", Description: "Asks its client for user_name, then greets it (task support required).", InputSchema: object(nil)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, ok := answer(req, "user_name")
			if !ok {
				return ask(map[string]*mcp.ElicitParams{"user_name": question("What is your name?", "user_name", "string")}), nil
			}
			return text(fmt.Sprintf("Hello, %v!", res.Content["user_name"])), nil
		})
	return s
}

// ask is the input_required answer (SEP-2322) asking the questions qs
// (key: the input request's id). The SDK asks a 2025-era client itself
// (elicitation/create) and calls the tool again with its answers.
func ask(qs map[string]*mcp.ElicitParams) *mcp.CallToolResult {
	m := mcp.InputRequestMap{}
	for k, q := range qs {
		m[k] = q
	}
	return &mcp.CallToolResult{InputRequests: m}
}

// question is a form elicitation for one field.
func question(message, field, typ string) *mcp.ElicitParams {
	return &mcp.ElicitParams{
		Message:         message,
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{field: map[string]any{"type": typ}}, "required": []string{field}},
	}
}

// answer is the client's answer to input request key in this round.
func answer(req *mcp.CallToolRequest, key string) (*mcp.ElicitResult, bool) {
	r, ok := req.Params.InputResponses[key].(*mcp.ElicitResult)
	return r, ok
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
