package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// listen opens a 2026-07-28 subscriptions/listen stream for notifications
// (e.g. {"toolsListChanged": true}) as the agent whose token is token and
// returns the JSON-RPC messages it carries, in order; the stream closes
// with the test.
func listen(t *testing.T, g *gw, token string, notifications map[string]any) <-chan map[string]any {
	t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen", "params": map[string]any{
		"notifications": notifications,
		"_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.MCP, strings.NewReader(string(body)))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := (&http.Client{Transport: &bearer{token: token, base: g.tr}}).Do(req) //nolint:bodyclose // the stream stays open for the test; t.Cleanup closes it
	if err != nil {
		cancel()
		t.Fatalf("subscriptions/listen: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		_ = resp.Body.Close()
		cancel()
		t.Fatalf("subscriptions/listen: HTTP %d", resp.StatusCode)
	}
	msgs := make(chan map[string]any, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(msgs)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data:")
			if !ok {
				continue
			}
			var m map[string]any
			if json.Unmarshal([]byte(strings.TrimSpace(data)), &m) == nil {
				msgs <- m
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		_ = resp.Body.Close()
		<-done
	})
	return msgs
}

// nextMethod returns the next message of msgs whose method is one of
// methods, failing the test if the stream ends or none comes in waitFor.
func nextMethod(t *testing.T, msgs <-chan map[string]any, methods ...string) map[string]any {
	t.Helper()
	timeout := time.After(waitFor(t))
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				t.Fatalf("the listen stream ended before %v", methods)
			}
			for _, want := range methods {
				if m["method"] == want {
					return m
				}
			}
		case <-timeout:
			t.Fatalf("no %v on the listen stream within %v", methods, waitFor(t))
		}
	}
}

// TestListChangedReachesListenStream (issue 11, SEP-2575 server-stateless):
// a 2026-07-28 tool call that changes its stdio upstream's tool list (the
// upstream session of 2026 calls is a process of its own) makes toolgate's
// catalog follow that session's list, and the change reaches an open
// subscriptions/listen stream as notifications/tools/list_changed; the new
// tool is then listed and callable by a 2026 client. An upstream
// list_changed that changes nothing in the catalog still reaches the stream.
func TestListChangedReachesListenStream(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	g := startGateway(t, teamConfig(filepath.Join(dir, "toolgate.db"), upstreamServer(record)+directTasksPolicy), teamEnv)
	msgs := listen(t, g, agentToken, map[string]any{"toolsListChanged": true})
	ack := nextMethod(t, msgs, "notifications/subscriptions/acknowledged")
	if n, _ := ack["params"].(map[string]any)["notifications"].(map[string]any); n["toolsListChanged"] != true {
		t.Fatalf("acknowledged %v, want toolsListChanged", ack)
	}

	a := &taskClient{t: t, g: g, token: agentToken, caps: map[string]any{}}
	res, e := a.rpc("tools/call", map[string]any{"name": "t__toggle_tool", "arguments": map[string]any{}}, "t__toggle_tool")
	if e != nil || res["isError"] == true {
		t.Fatalf("toggle_tool: %v %v", res, e)
	}
	changed := nextMethod(t, msgs, "notifications/tools/list_changed")
	if meta, _ := changed["params"].(map[string]any)["_meta"].(map[string]any); meta["io.modelcontextprotocol/subscriptionId"] == nil {
		t.Errorf("list_changed %v carries no subscription id", changed)
	}
	listed, e := a.rpc("tools/list", map[string]any{}, "")
	if e != nil {
		t.Fatalf("tools/list: %v", e)
	}
	if b, _ := json.Marshal(listed["tools"]); !strings.Contains(string(b), `"t__extra"`) {
		t.Fatalf("tools/list after the change lacks t__extra: %s", b)
	}
	res, e = a.rpc("tools/call", map[string]any{"name": "t__extra", "arguments": map[string]any{}}, "t__extra")
	if e != nil || taskResultText(t, map[string]any{"result": res}) != "extra" {
		t.Errorf("calling the new tool: %v %v, want extra", res, e)
	}

	// The upstream re-adds the tool as it was and says its list changed:
	// the catalog does not change, the stream (whose view toolgate does not
	// know) is told all the same.
	res, e = a.rpc("tools/call", map[string]any{"name": "t__toggle_tool", "arguments": map[string]any{"readd": true}}, "t__toggle_tool")
	if e != nil || taskResultText(t, map[string]any{"result": res}) != "re-added" {
		t.Fatalf("toggle_tool readd: %v %v", res, e)
	}
	nextMethod(t, msgs, "notifications/tools/list_changed")
}
