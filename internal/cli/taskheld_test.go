package cli_test

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/cli"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// TestApproveTaskHeldCall is polish18's item 2 in the CLI, against the
// real admin API, gate and SQLite store: approving a call held as an MCP
// task printed "the call runs only if its caller is still waiting", but
// the task carries the call (it runs whether or not the agent is still
// connected); the API's held_as says which it is, and show and approve
// print the right thing for each kind.
func TestApproveTaskHeldCall(t *testing.T) {
	db := sqlitetest.Open(t)
	g := gate.New(db, &policy.Policy{Default: policy.Approve}, nil)
	srv := httptest.NewServer(api.New(g, authenticate, nil))
	t.Cleanup(srv.Close)
	env := map[string]string{cli.EnvAddr: srv.URL, cli.EnvToken: tokAlic}
	run := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := cli.Run(t.Context(), args, &out, &errb, func(k string) string { return env[k] }); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		return out.String()
	}
	now := time.Now().UTC()
	add := func(id string, task bool) {
		t.Helper()
		r := request(id)
		r.Mode, r.CreatedAt, r.ExpiresAt = "hold", now, now.Add(time.Hour)
		if err := db.CreateRequest(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		if task {
			if err := db.CreateTask(t.Context(), store.Task{RequestID: r.ID, Principal: approval.Principal{ID: r.RequestedBy, Kind: "agent"},
				Arguments: []byte("sealed"), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	const taskID, holdID = "01900000-0000-7000-8000-0000000000a1", "01900000-0000-7000-8000-0000000000a2"
	add(taskID, true)
	add(holdID, false)

	if out := run("show", taskID); !strings.Contains(out, "hold (an MCP task: once approved it runs whether or not the agent is still connected)") {
		t.Errorf("show of the task-held call:\n%s", out)
	}
	if out := run("show", holdID); strings.Contains(out, "MCP task") {
		t.Errorf("show of a 2025 hold says task:\n%s", out)
	}
	if out := run("show", "--json", taskID); !strings.Contains(out, `"held_as":"task"`) {
		t.Errorf("show --json of the task-held call lacks held_as: %s", out)
	}
	if out, want := run("approve", taskID), taskID+": approve recorded; now approved (1 of 1, decided by alice); held as an MCP task, the call runs when its holder re-checks it against the policy in force and its approval quorum, whether or not the agent is still connected (the agent reads the result with tasks/get); approvals show says what became of it\n"; out != want {
		t.Errorf("approve of the task-held call printed\n%q, want\n%q", out, want)
	}
	if out, want := run("approve", holdID), holdID+": approve recorded; now approved (1 of 1, decided by alice); the call runs when its holder re-checks it against the policy in force and its approval quorum, if its caller is still waiting or re-sends it; approvals show says what became of it\n"; out != want {
		t.Errorf("approve of a 2025 hold printed\n%q, want\n%q", out, want)
	}
}
