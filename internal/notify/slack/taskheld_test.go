package slack

import (
	"net/http"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// TestInteractionTaskHeldSaysItRuns is polish18's item 2 in Slack: the
// feedback to an approval of a call held as an MCP task said "the call
// runs only if its caller is still waiting", but the task carries the
// call: it runs whether or not the agent is still connected.
func TestInteractionTaskHeldSaysItRuns(t *testing.T) {
	w := newWorld(t)
	r := w.request(t, "writes", "fs", func(r *approval.Request) { r.OnBehalfOf = "" })
	if err := w.db.CreateTask(t.Context(), store.Task{RequestID: r.ID, Principal: approval.Principal{ID: "agent-1", Kind: "agent"},
		Arguments: []byte("sealed"), CreatedAt: w.now, ExpiresAt: w.now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if status, body := w.post(t, click{user: "U0BOB", value: value(r)}); status != http.StatusOK {
		t.Fatalf("approve = %d %s", status, body)
	}
	want := "C0OPS/U0BOB: Your approval of fs · write_file was recorded; the request is approved (1 of 1 approvals); held as an MCP task, the call runs when its holder re-checks it against the policy in force and its approval quorum, whether or not the agent is still connected."
	select {
	case got := <-w.notes:
		if got != want {
			t.Errorf("feedback = %q, want %q", got, want)
		}
	case <-t.Context().Done():
		t.Fatal("no feedback")
	}
}
