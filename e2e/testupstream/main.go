// Command testupstream is a small, controllable MCP server used by toolgate's
// end-to-end tests as an upstream. It serves over stdio by default, or over
// Streamable HTTP with -http ADDR.
//
//	testupstream [-record FILE] [-http 127.0.0.1:0 [-only-2026]] [-ready-file F] [-task-support tool=optional,...]
//
// Over stdio, -task-support (else $TESTUPSTREAM_TASK_SUPPORT) lists the
// named tools with execution.taskSupport "optional" or "required".
//
// Every execution of a tool appends one line to the record file (-record,
// else $TESTUPSTREAM_RECORD; no file means no record), written with O_APPEND
// and fsynced (-record-nosync: not fsynced), so tests in another process can
// count executions. A line is
// "<tool> <compact arguments>", plus "slow started …" and "slow cancelled …"
// for the slow tool.
//
// Tools (all take a JSON object):
//
//   - echo_raw: returns the raw argument bytes, untouched, as text content.
//     It declares readOnlyHint true and openWorldHint false (the policy
//     tests of trust_annotations use them); the other tools declare none.
//   - big_result: returns structuredContent
//     {"max":9223372036854775807,"u64":18446744073709551615} written as raw
//     JSON, so the number literals are exact on the wire; with {"bytes": N}
//     it returns a text result of N bytes instead.
//   - slow {"seconds": N}: blocks until its context ends (recording
//     "cancelled") or, when N > 0, for N seconds.
//   - hang: never returns: it records "hang started <arguments>" and
//     blocks, ignoring cancellation, until the process exits (an upstream
//     stuck in a call).
//   - progress {"n": N}: sends N progress notifications (1..N of N) under the
//     request's progress token, then returns "done".
//   - ask {"tag": T}: sends the log message "log-T" (info), then asks its
//     client, by form elicitation, "question-T" for a string "answer"; it
//     returns "<action> <answer>" (isError when the elicitation failed).
//   - ask_mrtr {"tag": T}: asks for input the 2026-07-28 way (SEP-2322):
//     without an accepted inputResponses["answer"] it answers
//     input_required with a form elicitation "question-T" under the key
//     "answer" and the requestState "up-state-T" (recording "ask_mrtr
//     <args> asked"); with one it returns "answered <answer> state=<the
//     requestState it got>" (recording "ask_mrtr <args> answered"). A
//     client that did not declare elicitation gets -32021 (SEP-2575). To a
//     2025 client the SDK sends the elicitation as a classic request and
//     calls the tool again with the answer.
//   - toggle_tool {"readd": B}: adds the tool "extra" (which returns
//     "extra") to this server process, or removes it if it is there (with
//     readd true: adds it again as it was, changing nothing), so the server
//     tells its sessions notifications/tools/list_changed; it returns
//     "added", "removed" or "re-added".
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/e2e/internal/taskexec"
)

// bigResult is the structuredContent of big_result: both values are past
// 2^53, so any float64 round trip changes their digits.
const bigResult = `{"max":9223372036854775807,"u64":18446744073709551615}`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "testupstream:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	record := flag.String("record", os.Getenv("TESTUPSTREAM_RECORD"), "append one line per tool execution to this file")
	addr := flag.String("http", "", "serve Streamable HTTP at this address (path /mcp) instead of stdio")
	ready := flag.String("ready-file", "", "with -http: write the endpoint URL to this file once listening")
	only2026 := flag.Bool("only-2026", false, "with -http: speak only MCP 2026-07-28, statelessly (no initialize, no sessions)")
	noSync := flag.Bool("record-nosync", false, "write record lines without fsyncing them (benchmarks: a line is visible to other processes once written; the fsync only outlives a crash of the machine)")
	tasks := flag.String("task-support", os.Getenv("TESTUPSTREAM_TASK_SUPPORT"), "over stdio: tools listed with execution.taskSupport, as tool=optional|required,...")
	flag.Parse()

	rec := &recorder{path: *record, noSync: *noSync}
	var sopts *mcp.ServerOptions
	if *only2026 {
		sopts = &mcp.ServerOptions{SupportedProtocolVersions: []string{"2026-07-28"}}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "testupstream", Version: "1"}, sopts)
	addTools(s, rec)

	if *addr == "" {
		support, err := parseTaskSupport(*tasks)
		if err != nil {
			return err
		}
		return s.Run(ctx, taskexec.Transport(&mcp.StdioTransport{}, support))
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	url := "http://" + ln.Addr().String() + "/mcp"
	if *ready != "" {
		if err := os.WriteFile(*ready+".tmp", []byte(url), 0o600); err != nil {
			return err
		}
		if err := os.Rename(*ready+".tmp", *ready); err != nil {
			return err
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: *only2026}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// recorder appends lines to the record file. Its methods are safe for
// concurrent use.
type recorder struct {
	path   string
	noSync bool // -record-nosync
	mu     sync.Mutex
}

// add appends "tool detail\n" and fsyncs it (unless noSync). Errors go to
// stderr: the test then sees a missing line. The lines are serialised by
// mu, so with the fsync (milliseconds on a busy disk) the upstream runs
// at most one tool per fsync.
func (r *recorder) add(tool, detail string) {
	if r.path == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	f, err := os.OpenFile(r.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testupstream: record:", err)
		return
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "%s %s\n", tool, detail); err != nil {
		fmt.Fprintln(os.Stderr, "testupstream: record:", err)
		return
	}
	if r.noSync {
		return
	}
	if err := f.Sync(); err != nil {
		fmt.Fprintln(os.Stderr, "testupstream: record:", err)
	}
}

// compact returns raw without insignificant whitespace (one line), or raw
// itself if it is not valid JSON.
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

var objectSchema = json.RawMessage(`{"type":"object"}`)

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// extraTool is the tool toggle_tool adds.
func extraTool() (*mcp.Tool, mcp.ToolHandler) {
	return &mcp.Tool{Name: "extra", Description: "added by toggle_tool", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("extra"), nil }
}

func addTools(s *mcp.Server, rec *recorder) {
	// Raw handlers (Server.AddTool) see req.Params.Arguments exactly as
	// received: no schema validation, no decoding.
	closed := false
	var (
		extraMu sync.Mutex
		extra   bool
	)
	s.AddTool(&mcp.Tool{Name: "toggle_tool", Description: "adds or removes the tool extra", InputSchema: objectSchema},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct {
				Readd bool `json:"readd"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &a)
			extraMu.Lock()
			defer extraMu.Unlock()
			rec.add("toggle_tool", "")
			if extra && a.Readd {
				s.AddTool(extraTool())
				return text("re-added"), nil
			}
			if extra {
				s.RemoveTools("extra")
				extra = false
				return text("removed"), nil
			}
			s.AddTool(extraTool())
			extra = true
			return text("added"), nil
		})
	s.AddTool(&mcp.Tool{Name: "echo_raw", Description: "returns its raw argument bytes", InputSchema: objectSchema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &closed}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			rec.add("echo_raw", compact(req.Params.Arguments))
			return text(string(req.Params.Arguments)), nil
		})

	s.AddTool(&mcp.Tool{Name: "big_result", Description: "returns integers past 2^53 in structuredContent", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			rec.add("big_result", compact(req.Params.Arguments))
			var a struct {
				Bytes int `json:"bytes"`
			}
			if json.Unmarshal(req.Params.Arguments, &a) == nil && a.Bytes > 0 {
				return text(strings.Repeat("b", a.Bytes)), nil
			}
			res := text(bigResult)
			res.StructuredContent = json.RawMessage(bigResult)
			return res, nil
		})

	s.AddTool(&mcp.Tool{Name: "slow", Description: "blocks until cancelled or for seconds", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct {
				Seconds float64 `json:"seconds"`
			}
			if len(req.Params.Arguments) > 0 {
				if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
					return nil, fmt.Errorf("slow: arguments: %w", err)
				}
			}
			args := compact(req.Params.Arguments)
			rec.add("slow", "started "+args)
			var done <-chan time.Time
			if a.Seconds > 0 {
				t := time.NewTimer(time.Duration(a.Seconds * float64(time.Second)))
				defer t.Stop()
				done = t.C
			}
			select {
			case <-ctx.Done():
				rec.add("slow", "cancelled "+args)
				return nil, context.Cause(ctx)
			case <-done:
				rec.add("slow", "finished "+args)
				return text("slept"), nil
			}
		})

	s.AddTool(&mcp.Tool{Name: "hang", Description: "never returns, ignoring cancellation", InputSchema: objectSchema},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			rec.add("hang", "started "+compact(req.Params.Arguments))
			select {}
		})

	s.AddTool(&mcp.Tool{Name: "ask", Description: "logs, then asks its client a question (elicitation)", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct {
				Tag string `json:"tag"`
			}
			if len(req.Params.Arguments) > 0 {
				if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
					return nil, fmt.Errorf("ask: arguments: %w", err)
				}
			}
			rec.add("ask", compact(req.Params.Arguments))
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "testupstream", Data: "log-" + a.Tag})
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
				Message:         "question-" + a.Tag,
				RequestedSchema: json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}}}`),
			})
			if err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "elicitation failed: " + err.Error()}}}, nil
			}
			return text(fmt.Sprintf("%s %v", res.Action, res.Content["answer"])), nil
		})

	s.AddTool(&mcp.Tool{Name: "ask_mrtr", Description: "asks its client a question by a multi round-trip request (SEP-2322)", InputSchema: objectSchema},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct {
				Tag string `json:"tag"`
			}
			if len(req.Params.Arguments) > 0 {
				if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
					return nil, fmt.Errorf("ask_mrtr: arguments: %w", err)
				}
			}
			if caps := req.ClientCapabilities(); caps == nil || caps.Elicitation == nil {
				data, err := json.Marshal(mcp.MissingRequiredClientCapabilityData{RequiredCapabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}}})
				if err != nil {
					return nil, err
				}
				return nil, &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Message: "elicitation capability required", Data: data}
			}
			if r, ok := req.Params.InputResponses["answer"].(*mcp.ElicitResult); ok && r != nil && r.Action == "accept" {
				rec.add("ask_mrtr", compact(req.Params.Arguments)+" answered")
				return text(fmt.Sprintf("answered %v state=%s", r.Content["answer"], req.Params.RequestState)), nil
			}
			rec.add("ask_mrtr", compact(req.Params.Arguments)+" asked")
			return &mcp.CallToolResult{
				InputRequests: mcp.InputRequestMap{"answer": &mcp.ElicitParams{
					Message:         "question-" + a.Tag,
					RequestedSchema: json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}}}`),
				}},
				RequestState: "up-state-" + a.Tag,
			}, nil
		})

	s.AddTool(&mcp.Tool{Name: "progress", Description: "sends n progress notifications", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct {
				N int `json:"n"`
			}
			if len(req.Params.Arguments) > 0 {
				if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
					return nil, fmt.Errorf("progress: arguments: %w", err)
				}
			}
			rec.add("progress", compact(req.Params.Arguments))
			tok := req.Params.GetProgressToken()
			for i := 1; i <= a.N && tok != nil; i++ {
				err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: tok, Progress: float64(i), Total: float64(a.N), Message: fmt.Sprintf("step %d", i),
				})
				if err != nil {
					return nil, fmt.Errorf("progress: notify: %w", err)
				}
			}
			return text("done"), nil
		})
}

// parseTaskSupport reads -task-support: "tool=optional,tool2=required".
func parseTaskSupport(s string) (map[string]string, error) {
	out := map[string]string{}
	for kv := range strings.SplitSeq(s, ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || (v != "optional" && v != "required") {
			return nil, fmt.Errorf("-task-support: %q is not tool=optional or tool=required", kv)
		}
		out[k] = v
	}
	return out, nil
}
