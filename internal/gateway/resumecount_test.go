package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/seal"
	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/eachstore"
	"toolgate/internal/telemetry"
)

// countingNoSweep is the gate as a TaskKeeper that counts the tasks taken
// up (resumeCounter) and is no orphanLister: the gateway starts no sweep,
// so only the agent's tasks/get can find a task whose runner is gone.
type countingNoSweep struct {
	TaskKeeper
	resumeCounter
}

// TestTasksGetTakeOverCountsOnce (polish48; fixes49: the log line's found_by
// is the metric's label, tasks_get, one source in gate): on SQLite and on Postgres, an
// approved task whose holding instance stopped is taken up by the agent's
// tasks/get on a live instance that runs no sweep:
// toolgate_tasks_resumed_total{found_by="tasks_get",result="started"}
// counts it once, though the agent asks again while it runs and after it
// completed, and nothing is counted as found by the sweep or as
// cannot_run; the call runs once and its result answers the agent.
func TestTasksGetTakeOverCountsOnce(t *testing.T) {
	eachstore.Run(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		key, err := seal.NewKey(bytes.Repeat([]byte{4}, seal.KeySize))
		if err != nil {
			t.Fatal(err)
		}
		pol := policy.NewHolder(&policy.Policy{
			Default:  policy.Approve,
			Approval: policy.Approval{Timeout: time.Hour, Mode: policy.ModeHold, Approvals: 1, ValidFor: time.Hour},
		})
		reg := prometheus.NewRegistry()
		live := gate.New(db, pol, &gate.Options{Instance: "live", Lease: time.Minute, Key: key, Metrics: telemetry.NewMetrics(reg)})
		defer live.Stop()
		h := newHooks()
		var logs logBuffer
		g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}}, live,
			&Options{Tasks: countingNoSweep{live, live}, Logger: logs.logger()})
		waitUpstream(t, g, "up", nil)
		echo, ok := g.catalog.byReal("up", "echo")
		if !ok {
			t.Fatal("up's echo is not in the catalog")
		}
		agent := approval.Principal{ID: "desktop", Kind: "agent"}

		// The task, held by an instance that then stops, approved.
		stopped := gate.New(db, pol, &gate.Options{Instance: "stopped", Lease: time.Minute, Key: key})
		ctx, stop := context.WithCancelCause(t.Context())
		held := make(chan approval.Request, 1)
		done := make(chan struct{})
		go func() {
			defer close(done)
			stopped.Admit(ctx, gate.Call{Principal: agent, Server: "up", Tool: "echo", ToolDigest: echo.Digest,
				Arguments: json.RawMessage(`{"task":"taken up by tasks/get"}`), Task: true, OnHold: func(r approval.Request) { held <- r }})
		}()
		var id approval.ID
		select {
		case r := <-held:
			id = r.ID
		case <-time.After(testWait):
			t.Fatal("the task was not held")
		}
		stopped.Stop()
		stop(errors.New("the holding instance stops"))
		<-done
		if _, err := live.Review(t.Context(), id, approval.Principal{ID: "carol", Kind: "human"}, approval.VerdictApprove, "", ""); err != nil {
			t.Fatal(err)
		}
		if r, err := db.GetRequest(t.Context(), id); err != nil || !r.LeaseLapsed(time.Now()) {
			t.Fatalf("the stopped instance still holds the task: %+v, %v", r, err)
		}

		a := serveModernStdio(t, g)
		task := live.TaskID(id, agent.ID)
		n := 0
		get := func() rpcAnswer {
			t.Helper()
			n++
			a.send(taskLine(n, "tasks/get", fmt.Sprintf(`"taskId":%q`, task), true))
			got := decodeAnswer(t, []byte(a.response(n)))
			if got.Error != nil {
				t.Fatalf("tasks/get %d: %+v", n, got.Error)
			}
			return got
		}
		get() // takes it up
		get() // while it runs, or after: not again
		if o := waitOutcome(t, db, id); o != approval.OutcomeOK {
			t.Fatalf("the task's outcome %s, want ok", o)
		}
		if got := get(); got.Result["status"] != "completed" {
			t.Errorf("tasks/get after the run: %+v, want completed", got.Result)
		}
		if n := h.count("echo"); n != 1 {
			t.Errorf("upstream ran echo %d times, want 1", n)
		}
		if n := countLines(logs.String(), "resuming a task whose runner is gone", string(id), "found_by=tasks_get"); n != 1 {
			t.Errorf("tasks/get took the task up %d times, want 1:\n%s", n, logs.String())
		}
		for _, c := range []struct {
			by, result string
			want       float64
		}{
			{telemetry.FoundByTasksGet, "started", 1}, {telemetry.FoundByTasksGet, "cannot_run", 0},
			{telemetry.FoundBySweep, "started", 0}, {telemetry.FoundBySweep, "cannot_run", 0},
		} {
			if got := resumedCount(t, reg, c.by, c.result); got != c.want {
				t.Errorf("toolgate_tasks_resumed_total{found_by=%s,result=%s} = %v, want %v", c.by, c.result, got, c.want)
			}
		}
	})
}
