package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// TestDenyFlashSaysWhenTheAgentGetsTheReason (polish48): the page after a
// denial said "the agent gets your reason" for every call, which for a
// call nobody waits on any more (its holder's claim ended, or retry mode)
// holds only once the agent re-sends it, and for an MCP task when the
// agent next asks about it. The holder's state is the one the review read.
func TestDenyFlashSaysWhenTheAgentGetsTheReason(t *testing.T) {
	e := newEnv(t, nil)
	b := b2(t, e)
	live := e.request(1, `{"a":1}`, func(r *approval.Request) {
		r.HeldBy, r.LeaseUntil = "gw-live-1", e.now.Add(time.Hour)
	})
	ended := e.request(2, `{"a":2}`, func(r *approval.Request) {
		r.HeldBy, r.LeaseUntil = "gw-gone-2", e.now.Add(-time.Hour)
	})
	retry := e.request(3, `{"a":3}`, func(r *approval.Request) { r.Mode = "retry" })
	task := e.request(4, `{"a":4}`, func(r *approval.Request) {
		r.HeldBy, r.LeaseUntil = "gw-gone-4", e.now.Add(-time.Hour)
	})
	if err := e.db.CreateTask(t.Context(), store.Task{RequestID: task.ID, Principal: approval.Principal{ID: "agent-1", Kind: "agent"},
		Arguments: []byte("sealed"), CreatedAt: e.now, ExpiresAt: e.now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	const recorded = "Your denial was recorded"
	for _, c := range []struct {
		name string
		r    approval.Request
		want string
	}{
		{"live holder", live, "the agent, still waiting on the call, gets your reason now."},
		{"claim ended", ended, "the claim of the instance that held it ended): the agent gets your reason only if it re-sends the call."},
		{"retry mode", retry, "(retry mode, or the claim of the instance that held it ended): the agent gets your reason only if it re-sends the call."},
		{"task", task, "the agent gets your reason when it next asks about the task (tasks/get)."},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := b.review(c.r, "deny", url.Values{"arguments_hash": {c.r.ArgumentsHash}, "reason": {"not today"}})
			if a.status != http.StatusSeeOther {
				t.Fatalf("deny: %d\n%s", a.status, a.body)
			}
			page := b.page(a.header.Get("Location"))
			if !strings.Contains(page, recorded) || !strings.Contains(page, c.want) {
				t.Errorf("the page after the denial (%s) does not say %q", a.header.Get("Location"), c.want)
			}
			if c.name != "live holder" && strings.Contains(page, "gets your reason now") {
				t.Errorf("the page says the agent gets the reason now")
			}
		})
	}
	// The done= value the page is given, not the request's state now,
	// picks the text: an unknown value says nothing.
	if page := b.page("/ui/approvals/" + string(live.ID) + "?done=deny-other"); strings.Contains(page, recorded) {
		t.Errorf("an unknown done= value shows a flash")
	}
}
