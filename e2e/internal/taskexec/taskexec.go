// Package taskexec lets a go-sdk test server declare the task support of
// its tools (execution.taskSupport, the MCP 2025-11-25 Tool field the Tasks
// extension keeps), which the SDK's Tool cannot carry: a transport that adds
// it to every tools/list result the server writes.
package taskexec

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Transport wraps t so that each tool named in support is listed with
// execution.taskSupport support[name] ("optional" or "required").
func Transport(t mcp.Transport, support map[string]string) mcp.Transport {
	return transport{Transport: t, support: support}
}

type transport struct {
	mcp.Transport
	support map[string]string
}

func (t transport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return conn{Connection: c, support: t.support}, nil
}

type conn struct {
	mcp.Connection
	support map[string]string
}

func (c conn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if r, ok := msg.(*jsonrpc.Response); ok && r.Error == nil {
		if b, ok := withExecution(r.Result, c.support); ok {
			r.Result = b
		}
	}
	return c.Connection.Write(ctx, msg)
}

// withExecution returns result with execution.taskSupport added to its
// tools, if it is a tools/list result.
func withExecution(result json.RawMessage, support map[string]string) (json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(result, &m) != nil || m["tools"] == nil {
		return nil, false
	}
	var tools []map[string]json.RawMessage
	if json.Unmarshal(m["tools"], &tools) != nil {
		return nil, false
	}
	for _, tool := range tools {
		var name string
		_ = json.Unmarshal(tool["name"], &name)
		if ts, ok := support[name]; ok {
			tool["execution"], _ = json.Marshal(map[string]string{"taskSupport": ts})
		}
	}
	b, err := json.Marshal(tools)
	if err != nil {
		return nil, false
	}
	m["tools"] = b
	out, err := json.Marshal(m)
	return out, err == nil
}
