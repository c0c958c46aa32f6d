// Command tasksclient is a small MCP 2026-07-28 client that declares the
// Tasks extension: it calls one tool through toolgate and, when toolgate
// answers with a task (the call is held for an approval, or its server runs
// it in the background), polls the task with tasks/get, printing each new
// statusMessage ("awaiting approval <id>: 0 of 1 approvals; expires …"),
// and prints the result once the task has ended. Ctrl-C withdraws the task
// (tasks/cancel), which cancels its approval.
//
// Neither the Go SDK nor the TypeScript SDK offers Tasks on the client side,
// so this program speaks the protocol itself: plain JSON-RPC over HTTP POST
// to toolgate's /mcp, no session (2026-07-28 has none).
//
//	export TOOLGATE_AGENT_TOKEN=tg_dev_…   # the agent token `serve --dev` printed
//	go run ./examples/tasksclient -tool fs__write_file -args '{"path":"task.txt","content":"hi\n"}'
//
// While toolgate cannot be reached (an instance restarting), it polls the
// task again for up to a minute: the task lives in toolgate's store.
//
// Exit status: 0 when the call completed without isError, 1 when it failed,
// was cancelled or answered isError (or toolgate could not be reached), 2 on
// a usage error.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

const (
	protocolVersion = "2026-07-28"
	tasksExtension  = "io.modelcontextprotocol/tasks"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tasksclient", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "http://127.0.0.1:7070/mcp", "toolgate's agent endpoint")
	tool := fs.String("tool", "fs__write_file", "the tool to call, as toolgate lists it (<server>__<tool>)")
	argsJSON := fs.String("args", `{"path":"task.txt","content":"written by a task\n"}`, "the tool's arguments, a JSON object")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: TOOLGATE_AGENT_TOKEN=… tasksclient [-url URL] [-tool NAME] [-args JSON]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	token := os.Getenv("TOOLGATE_AGENT_TOKEN")
	if token == "" {
		fmt.Fprintln(stderr, "tasksclient: set TOOLGATE_AGENT_TOKEN to the agent's bearer token")
		return 2
	}
	var arguments map[string]any
	if err := json.Unmarshal([]byte(*argsJSON), &arguments); err != nil || arguments == nil {
		fmt.Fprintf(stderr, "tasksclient: -args must be a JSON object: %s\n", *argsJSON)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c := &client{url: *url, token: token, http: &http.Client{}}
	if err := c.callAndWait(ctx, stdout, *tool, arguments); err != nil {
		fmt.Fprintln(stderr, "tasksclient:", err)
		return 1
	}
	return 0
}

// client sends 2026-07-28 requests to one endpoint as one agent.
type client struct {
	url, token string
	http       *http.Client
	id         int
	// retryFor is how long tasks/get is tried again while toolgate
	// cannot be reached; 0 means defaultRetryFor.
	retryFor time.Duration
}

// defaultRetryFor is how long the client keeps polling a task while
// toolgate cannot be reached (a restart takes seconds).
const defaultRetryFor = time.Minute

func (c *client) unreachable() time.Duration {
	if c.retryFor > 0 {
		return c.retryFor
	}
	return defaultRetryFor
}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// task is what a task answer and tasks/get carry (SEP-2663), plus the
// fields of a plain result.
type task struct {
	ResultType     string          `json:"resultType"`
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage"`
	PollIntervalMs int64           `json:"pollIntervalMs"`
	Result         json.RawMessage `json:"result"`
	Error          *rpcError       `json:"error"`
	Meta           struct {
		Approval struct {
			ID string `json:"id"`
		} `json:"toolgate/approval"`
	} `json:"_meta"`
}

// callAndWait calls tool and, if it is answered with a task, polls the task
// until it ends, printing its status messages and then its result.
func (c *client) callAndWait(ctx context.Context, out io.Writer, tool string, arguments map[string]any) error {
	raw, err := c.rpc(ctx, "tools/call", tool, map[string]any{"name": tool, "arguments": arguments})
	if err != nil {
		return err
	}
	var t task
	if err := json.Unmarshal(raw, &t); err != nil {
		return fmt.Errorf("tools/call answer: %w", err)
	}
	if t.ResultType != "task" {
		// Allowed and run at once (or refused): the answer is the result.
		return printResult(out, raw)
	}
	fmt.Fprintf(out, "task %s: %s\n", t.TaskID, t.Status)
	if t.Meta.Approval.ID != "" {
		fmt.Fprintf(out, "approval %s: decide it with `toolgate approvals approve %s` (or deny)\n", t.Meta.Approval.ID, t.Meta.Approval.ID)
	}
	shown := ""
	var failing time.Time // since when tasks/get could not reach toolgate
	for {
		if t.StatusMessage != shown {
			fmt.Fprintf(out, "status: %s\n", t.StatusMessage)
			shown = t.StatusMessage
		}
		switch t.Status {
		case "completed":
			return printResult(out, t.Result)
		case "failed":
			if t.Error != nil {
				return fmt.Errorf("task %s failed: %w", t.TaskID, t.Error)
			}
			return fmt.Errorf("task %s failed", t.TaskID)
		case "cancelled":
			return fmt.Errorf("task %s was cancelled", t.TaskID)
		}
		wait := time.Duration(t.PollIntervalMs) * time.Millisecond
		if wait <= 0 {
			wait = 2 * time.Second
		}
		select {
		case <-ctx.Done():
			return c.cancel(ctx, t.TaskID, out)
		case <-time.After(wait):
		}
		id := t.TaskID
		raw, err := c.rpc(ctx, "tasks/get", id, map[string]any{"taskId": id})
		if ctx.Err() != nil {
			return c.cancel(ctx, id, out)
		}
		var ue *neturl.Error
		if errors.As(err, &ue) {
			// toolgate could not be reached (an instance restarting): the
			// task lives in its store, so poll again, on any instance.
			if failing.IsZero() {
				failing = time.Now()
				fmt.Fprintf(out, "tasks/get: %v; trying again for up to %s (the task lives in toolgate's store)\n", err, c.unreachable())
			}
			if time.Since(failing) < c.unreachable() {
				continue
			}
		}
		if err != nil {
			return fmt.Errorf("tasks/get %s: %w", id, err)
		}
		failing = time.Time{}
		t = task{}
		if err := json.Unmarshal(raw, &t); err != nil {
			return fmt.Errorf("tasks/get answer: %w", err)
		}
		t.TaskID = id
	}
}

// cancel withdraws the task after an interrupt (ctx is done): toolgate
// cancels its approval, and nothing runs. The request outlives ctx's
// cancellation, for at most 10 seconds.
func (c *client) cancel(ctx context.Context, taskID string, out io.Writer) error {
	ctx, done := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer done()
	if _, err := c.rpc(ctx, "tasks/cancel", taskID, map[string]any{"taskId": taskID}); err != nil {
		return fmt.Errorf("interrupted; tasks/cancel %s: %w", taskID, err)
	}
	fmt.Fprintf(out, "task %s: cancelled (interrupted)\n", taskID)
	return errors.New("interrupted: the task was cancelled")
}

// printResult prints a CallToolResult's content, one item a line, and
// fails when it is an isError result.
func printResult(out io.Writer, raw json.RawMessage) error {
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("result: %w", err)
	}
	for _, c := range r.Content {
		if c.Type == "text" {
			fmt.Fprintf(out, "result: %s\n", strings.TrimRight(c.Text, "\n"))
		} else {
			fmt.Fprintf(out, "result: (%s content)\n", c.Type)
		}
	}
	if r.IsError {
		return errors.New("the tool call answered isError")
	}
	return nil
}

// rpc sends one request and returns its result. name is the Mcp-Name
// header: the tool of a tools/call, the task of a tasks/* request.
func (c *client) rpc(ctx context.Context, method, name string, params map[string]any) (json.RawMessage, error) {
	c.id++
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion": protocolVersion,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{
			"extensions": map[string]any{tasksExtension: map[string]any{}},
		},
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", protocolVersion)
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode/100 != 2 {
		return nil, httpError(method, resp)
	}
	msg, err := readResponse(resp, c.id)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	if msg.Error != nil {
		return nil, msg.Error
	}
	return msg.Result, nil
}

// httpError says why a request was answered with a non-2xx status: a
// JSON-RPC error in the body (toolgate answers an unknown tool, say, with
// HTTP 400 and one) as the status, its code and its message; any other
// body as its first 4 KiB of text.
func httpError(method string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var m response
	if json.Unmarshal(b, &m) == nil && m.Error != nil && m.Error.Message != "" {
		return fmt.Errorf("%s: HTTP %s, JSON-RPC error %d: %s", method, resp.Status, m.Error.Code, m.Error.Message)
	}
	if len(b) > 4096 {
		b = b[:4096]
	}
	return fmt.Errorf("%s: HTTP %s: %s", method, resp.Status, strings.TrimSpace(string(b)))
}

// response is a JSON-RPC response.
type response struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

// readResponse reads the response to request id from a JSON body or from a
// server-sent event stream (whose other messages, such as progress
// notifications, it skips).
func readResponse(resp *http.Response, id int) (response, error) {
	want := fmt.Sprint(id)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m response
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			return m, fmt.Errorf("decode the answer: %w", err)
		}
		return m, nil
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		if d, ok := strings.CutPrefix(line, "data:"); ok {
			data.WriteString(strings.TrimPrefix(d, " "))
			continue
		}
		if line != "" || data.Len() == 0 {
			continue // a comment (": hb"), event:/id: fields, or no data yet
		}
		var m response
		err := json.Unmarshal([]byte(data.String()), &m)
		data.Reset()
		if err == nil && string(m.ID) == want {
			return m, nil
		}
	}
	if err := sc.Err(); err != nil {
		return response{}, fmt.Errorf("read the event stream: %w", err)
	}
	var m response
	if data.Len() > 0 && json.Unmarshal([]byte(data.String()), &m) == nil && string(m.ID) == want {
		return m, nil // the last event, without its closing blank line
	}
	return response{}, errors.New("the event stream ended without an answer")
}
