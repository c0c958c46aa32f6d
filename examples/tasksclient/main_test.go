package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// restartingGateway answers tools/call with a working task and drops the
// connection of the first `drops` tasks/get requests (as an instance
// restarting does), then answers tasks/get with the completed task; with
// drops < 0 it drops every tasks/get.
func restartingGateway(t *testing.T, drops int) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var gets atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("request: %v", err)
			return
		}
		result := `{"resultType":"task","taskId":"tgt_x","status":"working","statusMessage":"awaiting approval","pollIntervalMs":5}`
		if req.Method == "tasks/get" {
			if n := gets.Add(1); drops < 0 || int(n) <= drops {
				conn, _, err := w.(http.Hijacker).Hijack()
				if err != nil {
					t.Errorf("hijack: %v", err)
					return
				}
				_ = conn.Close()
				return
			}
			result = `{"resultType":"complete","taskId":"tgt_x","status":"completed","statusMessage":"the call ran","result":{"content":[{"type":"text","text":"done"}]}}`
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":` + result + `}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &gets
}

// TestPollsOnWhileUnreachable: a tasks/get that cannot reach toolgate (an
// instance restarting) is tried again, and the task's result is printed
// once it answers. Before branch newuser47 the first such tasks/get ended
// the client with exit status 1, leaving the approved task to run only at
// some other client's tasks/get.
func TestPollsOnWhileUnreachable(t *testing.T) {
	srv, gets := restartingGateway(t, 3)
	var out strings.Builder
	c := &client{url: srv.URL, token: "t", http: &http.Client{}, retryFor: 10 * time.Second}
	if err := c.callAndWait(t.Context(), &out, "up__write", map[string]any{}); err != nil {
		t.Fatalf("callAndWait: %v\n%s", err, out.String())
	}
	if n := gets.Load(); n != 4 {
		t.Errorf("tasks/get sent %d times, want 4 (3 dropped, then the answer)", n)
	}
	if got := out.String(); !strings.Contains(got, "result: done") || strings.Count(got, "trying again") != 1 {
		t.Errorf("output:\n%s\nwant one 'trying again' and the result", got)
	}
}

// TestGivesUpWhenUnreachable: the client stops polling once toolgate has
// been unreachable for its retry period, with the error.
func TestGivesUpWhenUnreachable(t *testing.T) {
	srv, gets := restartingGateway(t, -1)
	var out strings.Builder
	c := &client{url: srv.URL, token: "t", http: &http.Client{}, retryFor: 100 * time.Millisecond}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := c.callAndWait(ctx, &out, "up__write", map[string]any{})
	if err == nil || !strings.Contains(err.Error(), "tasks/get tgt_x") {
		t.Fatalf("callAndWait: %v, want the tasks/get error", err)
	}
	if ctx.Err() != nil {
		t.Fatal("it did not give up before the test's deadline")
	}
	if gets.Load() < 2 {
		t.Errorf("tasks/get sent %d times, want it tried again", gets.Load())
	}
}
