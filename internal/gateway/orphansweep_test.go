package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/seal"
	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/eachstore"
	"toolgate/internal/store/sqlstore/sqlitetest"
	"toolgate/internal/telemetry"
)

// sweepWatch is the real gate as the gateway's TaskKeeper, with each of
// the sweep's reads of the list told on listed.
type sweepWatch struct {
	*gate.Gate
	listed chan struct{}
}

func (w *sweepWatch) OrphanedTasks(ctx context.Context, after approval.ID, limit int) ([]approval.Request, approval.ID, error) {
	rs, next, err := w.Gate.OrphanedTasks(ctx, after, limit)
	select {
	case w.listed <- struct{}{}:
	default:
	}
	return rs, next, err
}

// waitSweeps waits until the sweep read its list n more times.
func (w *sweepWatch) waitSweeps(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-w.listed:
		case <-time.After(testWait):
			t.Fatal("the sweep did not read its list")
		}
	}
}

// TestSweepRunsTaskBehindApprovedCalls (branch tasks48): on SQLite and on
// Postgres, more than a page (orphanSweepLimit) of approved calls that are
// no task (deferred calls waiting for their agent), then an approved task
// whose tool this instance's catalog lacks, then an approved task whose
// holder stopped: a live instance's sweep runs the last, exactly once (one
// upstream call, one consume, its result in the ledger), though the
// others are older; the one it cannot run is logged and counted once,
// and not tried again over the following sweeps.
func TestSweepRunsTaskBehindApprovedCalls(t *testing.T) {
	eachstore.Run(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		key, err := seal.NewKey(bytes.Repeat([]byte{9}, seal.KeySize))
		if err != nil {
			t.Fatal(err)
		}
		pol := policy.NewHolder(&policy.Policy{
			Default:  policy.Approve,
			Approval: policy.Approval{Timeout: time.Hour, Mode: policy.ModeHold, Approvals: 1, ValidFor: time.Hour},
		})
		const lease = 300 * time.Millisecond
		reg := prometheus.NewRegistry()
		live := gate.New(db, pol, &gate.Options{Instance: "live", Lease: lease, Key: key, Metrics: telemetry.NewMetrics(reg)})
		defer live.Stop()
		watch := &sweepWatch{Gate: live, listed: make(chan struct{}, 1)}
		h := newHooks()
		var logs logBuffer
		g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}}, live,
			&Options{Tasks: watch, Logger: logs.logger()})
		waitUpstream(t, g, "up", nil)
		echo, ok := g.catalog.byReal("up", "echo")
		if !ok {
			t.Fatal("up's echo is not in the catalog")
		}
		carol := approval.Principal{ID: "carol", Kind: "human"}
		agent := approval.Principal{ID: "desktop", Kind: "agent"}
		approve := func(id approval.ID) {
			t.Helper()
			if _, err := live.Review(t.Context(), id, carol, approval.VerdictApprove, "", ""); err != nil {
				t.Fatal(err)
			}
		}

		// Approved calls that are no task, older than both tasks.
		for i := range orphanSweepLimit + 20 {
			a := live.Admit(t.Context(), gate.Call{Principal: agent, Server: "up", Tool: "echo", ToolDigest: echo.Digest,
				Arguments: json.RawMessage(fmt.Sprintf(`{"deferred":%d}`, i)), Defer: true})
			if !a.Pending || a.ApprovalID == "" {
				t.Fatalf("deferred call %d: %+v, want pending", i, a)
			}
			approve(a.ApprovalID)
		}
		// The tasks, held by an instance that then stops.
		stopped := gate.New(db, pol, &gate.Options{Instance: "stopped", Lease: lease, Key: key})
		ctx, stop := context.WithCancelCause(t.Context())
		held := make(chan approval.Request, 1)
		done := make(chan struct{}, 2)
		task := func(server, tool, args string) approval.ID {
			t.Helper()
			c := gate.Call{Principal: agent, Server: server, Tool: tool, ToolDigest: echo.Digest, Arguments: json.RawMessage(args),
				Task: true, OnHold: func(r approval.Request) { held <- r }}
			go func() {
				defer func() { done <- struct{}{} }()
				stopped.Admit(ctx, c)
			}()
			select {
			case r := <-held:
				return r.ID
			case <-time.After(testWait):
				t.Fatal("the task was not held")
				return ""
			}
		}
		gone := task("gone", "echo", `{"task":"its tool is gone"}`)
		runs := task("up", "echo", `{"task":"orphaned"}`)
		stopped.Stop()
		stop(errors.New("the holding instance stops"))
		<-done
		<-done
		approve(gone)
		approve(runs)

		if o := waitOutcome(t, db, runs); o != approval.OutcomeOK {
			t.Fatalf("the orphaned task's outcome %s, want ok", o)
		}
		select {
		case got := <-h.args:
			if string(got) != `{"task":"orphaned"}` {
				t.Errorf("upstream got %s", got)
			}
		case <-time.After(testWait):
			t.Fatal("the upstream did not get the task's call")
		}
		// Three more sweeps: nothing runs again, the task it cannot run is
		// not tried (nor logged) again.
		logs.waitFor(t, "cannot resume a task: its tool is not in the catalog now")
		watch.waitSweeps(t, 3)
		if n := h.count("echo"); n != 1 {
			t.Errorf("upstream ran echo %d times, want 1", n)
		}
		if res, err := db.GetResult(t.Context(), runs); err != nil || !strings.Contains(string(res.Result), "orphaned") {
			t.Errorf("the task's result in the ledger: %s, %v", res.Result, err)
		}
		evs, err := db.Events(t.Context(), 0, 10000)
		if err != nil {
			t.Fatal(err)
		}
		consumed := 0
		for _, ev := range evs {
			if ev.RequestID == runs && ev.Type == approval.EventConsumed {
				consumed++
			}
		}
		if consumed != 1 {
			t.Errorf("the task was consumed %d times, want 1", consumed)
		}
		out := logs.String()
		if n := countLines(out, "resuming a task whose runner is gone", string(runs), "found_by=sweep"); n != 1 {
			t.Errorf("the sweep took the task up %d times, want 1:\n%s", n, out)
		}
		if n := countLines(out, "cannot resume a task: its tool is not in the catalog now", string(gone)); n != 1 {
			t.Errorf("the task it cannot run was logged %d times, want 1:\n%s", n, out)
		}
		if r, err := db.GetRequest(t.Context(), gone); err != nil || r.State != approval.StateApproved {
			t.Errorf("the task it cannot run: %s, %v; want still approved (its agent's tasks/get may run it elsewhere)", r.State, err)
		}
		for _, c := range []struct {
			result string
			want   float64
		}{{"started", 1}, {"cannot_run", 1}} {
			if got := resumedCount(t, reg, "sweep", c.result); got != c.want {
				t.Errorf("toolgate_tasks_resumed_total{found_by=sweep,result=%s} = %v, want %v", c.result, got, c.want)
			}
		}
	})
}

// countLines counts the lines of out that contain every one of parts.
func countLines(out string, parts ...string) int {
	n := 0
lines:
	for _, l := range strings.Split(out, "\n") {
		for _, p := range parts {
			if !strings.Contains(l, p) {
				continue lines
			}
		}
		n++
	}
	return n
}

// resumedCount is toolgate_tasks_resumed_total{found_by, result} as
// gathered from reg.
func resumedCount(t *testing.T, reg *prometheus.Registry, foundBy, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "toolgate_tasks_resumed_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["found_by"] == foundBy && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no toolgate_tasks_resumed_total{found_by=%q,result=%q}", foundBy, result)
	return 0
}

// noSweep is the gate as a TaskKeeper that is no orphanLister: the
// gateway starts no sweep of its own, and the test runs sweeps itself.
type noSweep struct{ TaskKeeper }

// TestSweepPagesPastTasksItCannotRun (branch tasks48, polish48): with
// pages of 2, four approved tasks this instance cannot run (their tool is
// not in its catalog) ahead of the others. A sweep of one page finds the
// first two and stops (the page bound); the next goes on from there and,
// since a task found unrunnable on this try does not count against the
// sweep's budget (polish48: it did, so this sweep stopped after the
// second page), reads past the other two to the task behind them and runs
// it; once they are known, one sweep reads past them (three pages) to a
// task approved later, without trying or logging them again; each task
// runs once.
func TestSweepPagesPastTasksItCannotRun(t *testing.T) {
	db := sqlitetest.Open(t)
	key, err := seal.NewKey(bytes.Repeat([]byte{5}, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	pol := policy.NewHolder(&policy.Policy{
		Default:  policy.Approve,
		Approval: policy.Approval{Timeout: time.Hour, Mode: policy.ModeHold, Approvals: 1, ValidFor: time.Hour},
	})
	live := gate.New(db, pol, &gate.Options{Instance: "live", Lease: time.Minute, Key: key})
	defer live.Stop()
	h := newHooks()
	var logs logBuffer
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}}, live,
		&Options{Tasks: noSweep{live}, Logger: logs.logger()})
	waitUpstream(t, g, "up", nil)
	echo, _ := g.catalog.byReal("up", "echo")
	agent := approval.Principal{ID: "desktop", Kind: "agent"}
	// orphans records tasks through an instance that then stops, and
	// approves them; it returns their ids in order.
	orphans := func(name string, calls ...[2]string) []approval.ID {
		t.Helper()
		stopped := gate.New(db, pol, &gate.Options{Instance: name, Lease: time.Minute, Key: key})
		ctx, stop := context.WithCancelCause(t.Context())
		held := make(chan approval.Request, 1)
		done := make(chan struct{}, len(calls))
		var ids []approval.ID
		for _, c := range calls {
			call := gate.Call{Principal: agent, Server: c[0], Tool: "echo", ToolDigest: echo.Digest, Arguments: json.RawMessage(c[1]),
				Task: true, OnHold: func(r approval.Request) { held <- r }}
			go func() {
				defer func() { done <- struct{}{} }()
				stopped.Admit(ctx, call)
			}()
			select {
			case r := <-held:
				ids = append(ids, r.ID)
			case <-time.After(testWait):
				t.Fatal("the task was not held")
			}
		}
		stopped.Stop()
		stop(errors.New("the holding instance stops"))
		for range calls {
			<-done
		}
		for _, id := range ids {
			if _, err := live.Review(t.Context(), id, approval.Principal{ID: "carol", Kind: "human"}, approval.VerdictApprove, "", ""); err != nil {
				t.Fatal(err)
			}
		}
		// Listed once the stopped instance's claims ended.
		deadline := time.Now().Add(testWait)
		for {
			rs, _, err := live.OrphanedTasks(t.Context(), "", 1000)
			if err != nil {
				t.Fatal(err)
			}
			listed := map[approval.ID]bool{}
			for _, r := range rs {
				listed[r.ID] = true
			}
			all := true
			for _, id := range ids {
				all = all && listed[id]
			}
			if all {
				return ids
			}
			if time.Now().After(deadline) {
				t.Fatalf("%v not all listed: %v", ids, rs)
			}
			time.Sleep(10 * time.Millisecond) // the stopped instance's claims lapse
		}
	}
	ids := orphans("stopped-1", [2]string{"gone", `{"n":1}`}, [2]string{"gone", `{"n":2}`}, [2]string{"gone", `{"n":3}`},
		[2]string{"gone", `{"n":4}`}, [2]string{"up", `{"run":1}`})
	first := ids[4]
	s := newOrphanSweep()
	sweep := func() {
		t.Helper()
		if err := g.sweepOrphansOnce(t.Context(), live, s, 2, 3); err != nil {
			t.Fatal(err)
		}
	}
	cannotLogged := func() int {
		return countLines(logs.String(), "cannot resume a task: its tool is not in the catalog now")
	}
	if err := g.sweepOrphansOnce(t.Context(), live, s, 2, 1); err != nil {
		t.Fatal(err)
	}
	if n, ran := cannotLogged(), h.count("echo"); n != 2 || ran != 0 {
		t.Fatalf("after a sweep of one page: %d tasks found it cannot run, %d ran; want 2 and 0", n, ran)
	}
	sweep() // two pages more: two tasks it cannot run, then the first it can
	if n := cannotLogged(); n != 4 {
		t.Fatalf("after the second sweep: %d tasks found it cannot run, want 4", n)
	}
	if n := countLines(logs.String(), "resuming a task whose runner is gone", string(first)); n != 1 {
		t.Fatalf("the second sweep took the first runnable task up %d times, want 1 (it stopped at the tasks it cannot run):\n%s", n, logs.String())
	}
	if o := waitOutcome(t, db, first); o != approval.OutcomeOK {
		t.Fatalf("the first runnable task's outcome %s", o)
	}
	later := orphans("stopped-2", [2]string{"up", `{"run":2}`})[0]
	sweep() // three pages: two of tasks it cannot run, then the later task
	if o := waitOutcome(t, db, later); o != approval.OutcomeOK {
		t.Fatalf("the later task's outcome %s", o)
	}
	for range 3 {
		sweep()
	}
	if n, ran := cannotLogged(), h.count("echo"); n != 4 || ran != 2 {
		t.Errorf("in the end: tasks it cannot run logged %d times, %d calls ran; want 4 and 2:\n%s", n, ran, logs.String())
	}
	for _, id := range []approval.ID{first, later} {
		if n := countLines(logs.String(), "resuming a task whose runner is gone", string(id)); n != 1 {
			t.Errorf("task %s taken up %d times, want 1", id, n)
		}
	}
}
