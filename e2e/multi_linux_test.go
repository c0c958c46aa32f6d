package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"toolgate/internal/notify/webhook"
)

// hangingReceiver is a webhook receiver whose first request is held until
// release is closed (then answered 200, to a sender that may be gone); it
// reports that request's source port on arrived. Every request is counted
// by event id and attempt.
type hangingReceiver struct {
	URL     string
	arrived chan int // the first request's source port
	release chan struct{}
	freed   sync.Once

	mu       sync.Mutex
	hung     bool
	attempts map[string][]string // event id → Toolgate-Attempt of each request
	types    map[string]string   // event id → event type
	changed  chan struct{}
}

func startHangingReceiver(t *testing.T) *hangingReceiver {
	t.Helper()
	h := &hangingReceiver{arrived: make(chan int, 1), release: make(chan struct{}), attempts: map[string][]string{},
		types: map[string]string{}, changed: make(chan struct{})}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(h.free) // before srv.Close
	h.URL = srv.URL + "/hooks/hang"
	return h
}

// free lets the held first request be answered.
func (h *hangingReceiver) free() { h.freed.Do(func() { close(h.release) }) }

func (h *hangingReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	id := r.Header.Get(webhook.HeaderEventID)
	var typ string
	if i := strings.Index(string(raw), `"type":"`); i >= 0 {
		typ, _, _ = strings.Cut(string(raw[i+len(`"type":"`):]), `"`)
	}
	h.mu.Lock()
	first := !h.hung
	h.hung = true
	h.attempts[id] = append(h.attempts[id], r.Header.Get(webhook.HeaderAttempt))
	h.types[id] = typ
	close(h.changed)
	h.changed = make(chan struct{})
	h.mu.Unlock()
	if first {
		_, port, _ := net.SplitHostPort(r.RemoteAddr)
		n, _ := strconv.Atoi(port)
		h.arrived <- n
		<-h.release
	}
	w.WriteHeader(http.StatusOK)
}

// waitAttempts waits until event id has been received n times and returns
// every event's attempts.
func (h *hangingReceiver) waitAttempts(t *testing.T, id string, n int) map[string][]string {
	t.Helper()
	deadline := time.After(waitFor(t))
	for {
		h.mu.Lock()
		got := len(h.attempts[id])
		all := map[string][]string{}
		for k, v := range h.attempts {
			all[k] = append([]string(nil), v...)
		}
		changed := h.changed
		h.mu.Unlock()
		if got >= n {
			return all
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("event %s received %d times, want %d; all: %v", id, got, n, all)
		}
	}
}

// pidOfLocalPort returns which of pids has an open TCP socket bound to
// 127.0.0.1:port (read from /proc), or 0.
func pidOfLocalPort(t *testing.T, port int, pids ...int) int {
	t.Helper()
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		t.Skipf("no /proc/net/tcp: %v", err)
	}
	defer func() { _ = f.Close() }()
	want := fmt.Sprintf(":%04X", port)
	inodes := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 9 && strings.HasSuffix(fs[1], want) {
			inodes["socket:["+fs[9]+"]"] = true
		}
	}
	for _, pid := range pids {
		dir := fmt.Sprintf("/proc/%d/fd", pid)
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && inodes[l] {
				return pid
			}
		}
	}
	return 0
}

// TestDeliveryOfKilledInstance: two instances with one webhook channel on
// one Postgres database; the instance attempting a delivery is killed
// (SIGKILL) while the receiver holds the request, and the receiver then
// answers 200 to the dead sender. The other instance takes the delivery
// over once its lease lapses and sends the same event again, with the same
// Toolgate-Event-Id and the next attempt number: the documented
// at-least-once duplicate ("an instance died after the receiver answered
// but before the answer was recorded"). No other event is sent twice.
// notify.timeout is 5m: the lease is short and renewed while the request
// is under way (notify.DefaultLease, 5 s; branch revise38), so the take-over
// does not wait for the timeout; before, the lease was 2 × notify.timeout +
// 5 s from the claim, here longer than any of the test's waits.
func TestDeliveryOfKilledInstance(t *testing.T) {
	dsn := freshPGDatabase(t, pgTestDSN(t))
	rc := startHangingReceiver(t)
	record := filepath.Join(t.TempDir(), "record.log")
	cfg := pgGatewayConfig(auditorYAML + upstreamServer(record) + multiPolicy + `
notify:
  poll: 100ms
  backoff: 100ms
  timeout: 5m
  channels:
    - name: hook
      type: webhook
      url_env: HOOK_URL
      secret_env: HOOK_SECRET
      events: [requested, decided]
`)
	env := multiEnv(dsn, rc.URL)
	a := startGateway(t, cfg, env)
	b := startGateway(t, cfg, env)

	const args = `{"case":"delivery-killed"}`
	ch := callAsync(t.Context(), b.connect(t, nil, nil), toolCall("t__echo_raw", args))
	var port int
	select {
	case port = <-rc.arrived:
	case <-time.After(waitFor(t)):
		t.Fatal("no notification arrived")
	}
	pid := pidOfLocalPort(t, port, a.cmd.Process.Pid, b.cmd.Process.Pid)
	survivor := b
	switch pid {
	case a.cmd.Process.Pid:
		a.kill(t)
	case b.cmd.Process.Pid:
		b.kill(t)
		survivor = a
		if r := await(t, ch); r.err == nil {
			t.Fatalf("the call returned %v after its gateway was killed, want a transport error", text(r.res))
		}
	default:
		t.Fatalf("no instance has the connection from port %d", port)
	}
	killedAt := time.Now()
	rc.free() // answered 200, to a sender that is gone
	rc.mu.Lock()
	var first string
	for id := range rc.attempts {
		first = id
	}
	rc.mu.Unlock()

	all := rc.waitAttempts(t, first, 2)
	t.Logf("event %s sent again by the survivor (%s) %v after the kill", first, map[bool]string{true: "A", false: "B"}[survivor == a], time.Since(killedAt).Round(time.Millisecond))
	if got := all[first]; len(got) != 2 || got[0] != "1" || got[1] != "2" {
		t.Errorf("event %s attempts %q, want [1 2]", first, got)
	}

	// The survivor decides the request; its event arrives once.
	p := awaitPendingArgs(t, survivor.Admin, args)
	mustReview(t, survivor.Admin, p.ID, "deny", "after the kill")
	var decided string
	for deadline := time.Now().Add(waitFor(t)); decided == "" && time.Now().Before(deadline); time.Sleep(pollEvery) {
		rc.mu.Lock()
		for id, typ := range rc.types {
			if typ == "denied" {
				decided = id
			}
		}
		rc.mu.Unlock()
	}
	if decided == "" {
		t.Fatal("the denial was not announced")
	}
	if survivor == b {
		if msg := mustIsError(t, await(t, ch)); !strings.Contains(msg, "denied") {
			t.Errorf("the held call says %q, want the denial", msg)
		}
	}
	// The outbox agrees: both rows delivered, the killed one on its
	// second attempt, nothing left to send again.
	ctx, cancel := context.WithTimeout(t.Context(), waitFor(t))
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	rows := map[string]string{}
	for deadline := time.Now().Add(waitFor(t)); ; time.Sleep(pollEvery) {
		clear(rows)
		rs, err := conn.Query(ctx, `SELECT event_id, state || '/' || attempts FROM deliveries`)
		if err != nil {
			t.Fatal(err)
		}
		delivered := 0
		for rs.Next() {
			var id, v string
			if err := rs.Scan(&id, &v); err != nil {
				t.Fatal(err)
			}
			rows[id] = v
			if strings.HasPrefix(v, "delivered/") {
				delivered++
			}
		}
		if err := rs.Err(); err != nil {
			t.Fatal(err)
		}
		if delivered == len(rows) && len(rows) == 2 || time.Now().After(deadline) {
			break
		}
	}
	if rows[first] != "delivered/2" || rows[decided] != "delivered/1" || len(rows) != 2 {
		t.Errorf("deliveries %v, want %s delivered/2 and %s delivered/1", rows, first, decided)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for id, at := range rc.attempts {
		if id != first && len(at) != 1 {
			t.Errorf("event %s (%s) received %d times, want once", id, rc.types[id], len(at))
		}
	}
	if len(rc.attempts) != 2 {
		t.Errorf("received events %v, want requested and denied", rc.types)
	}
}

// TestKilledHolderOnPostgres: two instances on one database; the one that
// holds an approved call dies (SIGKILL), once between the decision and the
// dispatch (it is stopped with SIGSTOP while the approval is made through
// the other) and once during the dispatch. Between decision and dispatch,
// nothing ran: the agent's identical re-send on the other instance takes
// the approval over and runs the call once. During the dispatch, the other
// instance records the outcome "unknown" once the lease lapses, the
// approver is told (webhook, approvals show), the audit has one dispatch,
// and a re-send does not run it again without a new approval.
func TestKilledHolderOnPostgres(t *testing.T) {
	dsn := freshPGDatabase(t, pgTestDSN(t))
	rc := startHookReceiver(t, 0)
	record := filepath.Join(t.TempDir(), "record.log")
	cfg := killedHolderConfig(record)
	env := multiEnv(dsn, rc.URL)
	b := startGateway(t, cfg, env)
	onB := b.connect(t, nil, nil)

	t.Run("between decision and dispatch", func(t *testing.T) {
		a := startGateway(t, cfg, env)
		const args = `{"case":"stopped-before-dispatch"}`
		ch := callAsync(t.Context(), a.connect(t, nil, nil), toolCall("t__echo_raw", args))
		p := awaitPendingArgs(t, b.Admin, args)
		if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		mustReview(t, b.Admin, p.ID, "approve", "")
		if got := fetchApproval(t, b.Admin, p.ID); got.State != "approved" {
			t.Fatalf("approval is %s while its holder is stopped, want approved", got.State)
		}
		a.kill(t)
		if r := await(t, ch); r.err == nil {
			t.Fatalf("the call returned %v after its gateway was killed, want a transport error", text(r.res))
		}
		if n := countRecord(t, record, "echo_raw "+args); n != 0 {
			t.Fatalf("the call ran %d times before its holder died", n)
		}
		// The agent re-sends the identical call on B: after the lease
		// lapses, it takes the approval over and runs once.
		start := time.Now()
		if got := mustOK(t, await(t, callAsync(t.Context(), onB, toolCall("t__echo_raw", args)))); got != args {
			t.Errorf("re-send on B returned %q, want %q", got, args)
		}
		t.Logf("re-send on B answered %v after the kill", time.Since(start).Round(time.Millisecond))
		if n := countRecord(t, record, "echo_raw "+args); n != 1 {
			t.Errorf("the call ran %d times, want once", n)
		}
		if got := fetchApproval(t, b.Admin, p.ID); got.State != "consumed" || got.DispatchOutcome != "ok" {
			t.Errorf("approval %s: state %s, outcome %q; want consumed, ok", p.ID, got.State, got.DispatchOutcome)
		}
		if got := approvals(t, b.Admin, "pending"); len(got) != 0 {
			t.Errorf("the re-send asked for a new approval: %+v", got)
		}
	})

	t.Run("during dispatch", func(t *testing.T) {
		a := startGateway(t, cfg, env)
		const args = `{"case":"killed-in-dispatch"}`
		ch := callAsync(t.Context(), a.connect(t, nil, nil), toolCall("t__slow", args))
		p := awaitPendingArgs(t, b.Admin, args)
		mustCLI(t, b.Admin, "approve", p.ID)
		waitRecord(t, record, "slow started "+args)
		a.kill(t)
		if r := await(t, ch); r.err == nil {
			t.Fatalf("the call returned %v after its gateway was killed, want a transport error", text(r.res))
		}
		// B's sweeper records what nobody can know, and the approver hears it.
		rc.waitEvent(t, p.ID, "dispatched", "unknown")
		if got := fetchApproval(t, b.Admin, p.ID); got.State != "consumed" || got.DispatchOutcome != "unknown" {
			t.Errorf("approval %s: state %s, outcome %q; want consumed, unknown", p.ID, got.State, got.DispatchOutcome)
		}
		if out := mustCLI(t, b.Admin, "show", p.ID); !strings.Contains(out, "unknown") {
			t.Errorf("approvals show on B does not say the outcome is unknown:\n%s", out)
		}
		// A re-send of the identical call does not run it again: it asks
		// for a new approval, which is denied here.
		re := callAsync(t.Context(), onB, toolCall("t__slow", args))
		var again apiApproval
		for deadline := time.Now().Add(waitFor(t)); ; time.Sleep(pollEvery) {
			if q := pendingWithArgs(t, b.Admin, args); q != nil {
				again = *q
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the re-send after an unknown outcome asked for no approval")
			}
		}
		if again.ID == p.ID {
			t.Errorf("the re-send reuses approval %s, whose call may have run", p.ID)
		}
		mustReview(t, b.Admin, again.ID, "deny", "may have run already")
		if msg := mustIsError(t, await(t, re)); !strings.Contains(msg, "denied") {
			t.Errorf("denied re-send says %q", msg)
		}
		if n := countRecord(t, record, "slow started "+args); n != 1 {
			t.Errorf("the slow call started %d times, want once", n)
		}
		if got := fetchApproval(t, b.Admin, again.ID); got.State != "denied" {
			t.Errorf("the re-send's approval is %s, want denied", got.State)
		}
		dispatched, outcome := 0, ""
		for deadline := time.Now().Add(waitFor(t)); dispatched == 0 && time.Now().Before(deadline); time.Sleep(pollEvery) {
			_, recs := auditExport(t, b.Admin)
			for _, r := range recs {
				if r.Type == "dispatched" && r.ApprovalID == p.ID {
					dispatched++
					outcome = r.Outcome
				}
			}
		}
		if dispatched != 1 || outcome != "unknown" {
			t.Errorf("audit: approval %s dispatched %d times, last outcome %q; want once, unknown", p.ID, dispatched, outcome)
		}
	})

	t.Run("approved, holder dead, nobody re-sends", func(t *testing.T) {
		a := startGateway(t, cfg, env)
		const args = `{"n":1,"case":"never-re-sent"}`
		ch := callAsync(t.Context(), a.connect(t, nil, nil), toolCall("t__progress", args))
		p := awaitPendingArgs(t, b.Admin, args)
		if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		mustReview(t, b.Admin, p.ID, "approve", "")
		a.kill(t)
		if r := await(t, ch); r.err == nil {
			t.Fatalf("the call returned %v after its gateway was killed, want a transport error", text(r.res))
		}
		// The approval is not kept forever, nor dropped silently: once
		// valid_for (2 s) passes it ends, and the approver is told.
		end := approvalAt(t, b.Admin, p.ID)
		for deadline := time.Now().Add(waitFor(t)); end.State == "approved" && time.Now().Before(deadline); time.Sleep(pollEvery) {
			end = approvalAt(t, b.Admin, p.ID)
		}
		t.Logf("approval %s ended %s (%s)", p.ID, end.State, end.Reason)
		if end.State != "expired" {
			t.Fatalf("approval %s is %s, want expired", p.ID, end.State)
		}
		rc.waitEvent(t, p.ID, "expired", "")
		if n := countRecord(t, record, "progress "+args); n != 0 {
			t.Errorf("the call ran %d times, want never", n)
		}
		if out := mustCLI(t, b.Admin, "show", p.ID); !strings.Contains(out, "expired") {
			t.Errorf("approvals show on B:\n%s\nwant it expired", out)
		}
	})

	t.Run("holder stopped with SIGTERM", func(t *testing.T) {
		a := startGateway(t, cfg, env)
		const args = `{"case":"rolling-restart"}`
		ch := callAsync(t.Context(), a.connect(t, nil, nil), toolCall("t__echo_raw", args))
		p := awaitPendingArgs(t, b.Admin, args)
		if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		// The stopping instance answers the held call "the gateway is
		// shutting down" (logged "gateway stopping; approval stays open"),
		// written before the agent's session closes (shutdown37; before,
		// about one run in eight got "request terminated without response").
		if r := await(t, ch); r.err != nil {
			t.Errorf("the held call on the stopping instance ended with a transport error: %v, want that the gateway is shutting down", r.err)
		} else if msg := text(r.res); !r.res.IsError || !strings.Contains(msg, "shutting down") {
			t.Errorf("the held call on the stopping instance was answered %q, want that the gateway is shutting down", msg)
		}
		<-a.exited
		// The claim was released: the identical re-send on B continues the
		// same request (approved before or after it arrives) and runs once.
		start := time.Now()
		re := callAsync(t.Context(), onB, toolCall("t__echo_raw", args))
		mustCLI(t, b.Admin, "approve", p.ID)
		if got := mustOK(t, await(t, re)); got != args {
			t.Errorf("re-send on B returned %q, want %q", got, args)
		}
		t.Logf("re-send on B held, approved and answered %v after the stop", time.Since(start).Round(time.Millisecond))
		if n := countRecord(t, record, "echo_raw "+args); n != 1 {
			t.Errorf("the call ran %d times, want once", n)
		}
		if got := approvals(t, b.Admin, "pending"); len(got) != 0 {
			t.Errorf("the re-send asked for a new approval: %+v", got)
		}
	})
}
