package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pgPolicy holds every t__echo_raw call for approval and allows
// t__big_result. The timeout is long on purpose: a call that waited for it
// instead of being answered would show as a test timeout.
const pgPolicy = `
policy:
  default: deny
  rules:
    - name: echo needs approval
      server: t
      tools: [echo_raw]
      effect: approve
      approval: { timeout: 5m }
    - name: big results are fine
      server: t
      tools: [big_result]
      effect: allow
`

// TestPostgresCrossInstance runs two gateway processes, A and B, on one
// Postgres database with one counting upstream record: calls held on A are
// decided through B (its API, and the CLI pointed at it), decisions on both
// instances race, and B does not know A's MCP sessions (case C04).
func TestPostgresCrossInstance(t *testing.T) {
	dsn := freshPGDatabase(t, pgTestDSN(t))
	record := filepath.Join(t.TempDir(), "record.log")
	start := time.Now()
	a := startPGGateway(t, dsn, upstreamServer(record)+pgPolicy)
	b := startPGGateway(t, dsn, upstreamServer(record)+pgPolicy)
	elapsed(t, "two gateways on one Postgres started", start)
	cs := a.connect(t, nil, nil)
	executed := map[string]bool{} // record lines of the calls that ran, by line

	t.Run("approved through B's API", func(t *testing.T) {
		defer elapsed(t, "held on A, approved through B's API", time.Now())
		const args = `{"case":"api-b"}`
		ch := callAsync(t.Context(), cs, echoCall(args))
		p := waitPendingArgs(t, b.Admin, args) // A's request, seen through B
		mustReview(t, b.Admin, p.ID, "approve", "")
		if got := mustOK(t, await(t, ch)); got != args {
			t.Errorf("call returned %q, want %q", got, args)
		}
		executed["echo_raw "+args] = true
		if n := countRecord(t, record, "echo_raw "+args); n != 1 {
			t.Errorf("upstream ran the call %d times, want 1", n)
		}
		if got := approvalAt(t, a.Admin, p.ID); got.State != "consumed" || got.DecidedBy != approverID {
			t.Errorf("approval seen through A: state %q, decided_by %q; want consumed, %s", got.State, got.DecidedBy, approverID)
		}
	})

	t.Run("approved through the CLI pointed at B", func(t *testing.T) {
		defer elapsed(t, "held on A, approved through the CLI on B", time.Now())
		const args = `{"case":"cli-b"}`
		ch := callAsync(t.Context(), cs, echoCall(args))
		p := waitPendingArgs(t, a.Admin, args)
		out := mustCLI(t, b.Admin, "approve", p.ID)
		if !strings.Contains(out, p.ID) || !strings.Contains(out, "approved") {
			t.Errorf("approve printed %q, want the id and the new state", out)
		}
		if got := mustOK(t, await(t, ch)); got != args {
			t.Errorf("call returned %q, want %q", got, args)
		}
		executed["echo_raw "+args] = true
		if n := countRecord(t, record, "echo_raw "+args); n != 1 {
			t.Errorf("upstream ran the call %d times, want 1", n)
		}
	})

	t.Run("denied through B with a reason", func(t *testing.T) {
		defer elapsed(t, "held on A, denied through B", time.Now())
		const args = `{"case":"deny-b"}`
		const reason = "not during the freeze (e2e)"
		ch := callAsync(t.Context(), cs, echoCall(args))
		p := waitPendingArgs(t, b.Admin, args)
		mustCLI(t, b.Admin, "deny", p.ID, "--reason", reason)
		msg := mustIsError(t, await(t, ch))
		if !strings.Contains(msg, "denied") || !strings.Contains(msg, reason) || !strings.Contains(msg, approverID) {
			t.Errorf("denied call says %q, want the denial, the reviewer and the reason %q", msg, reason)
		}
		if n := countRecord(t, record, "echo_raw "+args); n != 0 {
			t.Errorf("upstream ran a denied call %d times", n)
		}
		if got := approvalAt(t, a.Admin, p.ID); got.State != "denied" || got.Reason != reason {
			t.Errorf("approval: state %q, reason %q; want denied, %q", got.State, got.Reason, reason)
		}
	})

	t.Run("approve on A races deny on B", func(t *testing.T) {
		defer elapsed(t, "approve on A racing deny on B, 4 rounds", time.Now())
		for round := range 4 {
			args := fmt.Sprintf(`{"case":"race-approve-deny","round":%d}`, round)
			ch := callAsync(t.Context(), cs, echoCall(args))
			p := waitPendingArgs(t, a.Admin, args)
			rs := raceReviews(t.Context(),
				func(ctx context.Context) reviewResult { return postReview(ctx, a.Admin, p.ID, "approve", "") },
				func(ctx context.Context) reviewResult { return postReview(ctx, b.Admin, p.ID, "deny", "race") })
			approve, deny := rs[0], rs[1]
			res := await(t, ch)
			if res.err != nil {
				t.Fatalf("round %d: call: %v", round, res.err)
			}
			final := approvalAt(t, b.Admin, p.ID)
			runs := countRecord(t, record, "echo_raw "+args)
			t.Logf("round %d: approve %d, deny %d, final state %s, caller isError=%v, upstream runs %d",
				round, approve.Status, deny.Status, final.State, res.res.IsError, runs)
			if approve.Err != nil || deny.Err != nil {
				t.Fatalf("round %d: approve err %v, deny err %v", round, approve.Err, deny.Err)
			}
			switch {
			case !res.res.IsError: // the approval won
				executed["echo_raw "+args] = true
				if final.State != "consumed" || runs != 1 {
					t.Errorf("round %d: the caller got a result, but the approval is %s and the upstream ran %d times; want consumed and 1", round, final.State, runs)
				}
				if approve.Status != http.StatusOK || deny.Status != http.StatusConflict {
					t.Errorf("round %d: the approval won, but approve answered %d and deny %d; want 200 and 409\n%s\n%s", round, approve.Status, deny.Status, approve.Body, deny.Body)
				}
			default: // the denial won
				if msg := text(res.res); !strings.Contains(msg, "denied") || !strings.Contains(msg, "race") {
					t.Errorf("round %d: the caller got isError %q, want the denial with its reason", round, msg)
				}
				if final.State != "denied" || runs != 0 {
					t.Errorf("round %d: the caller was denied, but the approval is %s and the upstream ran %d times; want denied and 0", round, final.State, runs)
				}
				if deny.Status != http.StatusOK || approve.Status != http.StatusConflict {
					t.Errorf("round %d: the denial won, but deny answered %d and approve %d; want 200 and 409\n%s\n%s", round, deny.Status, approve.Status, deny.Body, approve.Body)
				}
			}
		}
	})

	t.Run("approve on both at once runs once", func(t *testing.T) {
		defer elapsed(t, "approve on A and B at once, 4 rounds", time.Now())
		for round := range 4 {
			args := fmt.Sprintf(`{"case":"race-approve-approve","round":%d}`, round)
			ch := callAsync(t.Context(), cs, echoCall(args))
			p := waitPendingArgs(t, b.Admin, args)
			rs := raceReviews(t.Context(),
				func(ctx context.Context) reviewResult { return postReview(ctx, a.Admin, p.ID, "approve", "") },
				func(ctx context.Context) reviewResult { return postReview(ctx, b.Admin, p.ID, "approve", "") })
			if got := mustOK(t, await(t, ch)); got != args {
				t.Errorf("round %d: call returned %q, want %q", round, got, args)
			}
			executed["echo_raw "+args] = true
			oks := 0
			for i, r := range rs {
				switch {
				case r.Err != nil:
					t.Errorf("round %d: approve %d: %v", round, i, r.Err)
				case r.Status == http.StatusOK:
					oks++
				case r.Status != http.StatusConflict:
					t.Errorf("round %d: approve %d answered %d, want 200 or 409\n%s", round, i, r.Status, r.Body)
				}
			}
			if oks == 0 {
				t.Errorf("round %d: neither approve answered 200: %+v", round, rs)
			}
			if n := countRecord(t, record, "echo_raw "+args); n != 1 {
				t.Errorf("round %d: upstream ran the call %d times, want 1", round, n)
			}
			if got := approvalAt(t, a.Admin, p.ID); got.State != "consumed" {
				t.Errorf("round %d: approval is %s, want consumed", round, got.State)
			}
		}
	})

	t.Run("B does not know A's session", func(t *testing.T) {
		testUnknownSession(t, a, b, record)
	})

	// Nothing else ran, on either instance.
	for _, l := range readRecord(t, record) {
		if !executed[l] {
			t.Errorf("upstream record has %q, which no approved call explains", l)
		}
	}
	if got := approvals(t, a.Admin, "pending"); len(got) != 0 {
		t.Errorf("approvals left pending: %+v", got)
	}
}

// testUnknownSession is case C04 with two instances: a session initialised
// on a is unknown to b, which answers 404 (not 400, 500 or 200 with an error
// body, and without opening an SSE stream) so a compliant client
// re-initialises; a held call sent with it to b never reaches the gate. A
// made-up id is 404 on a too. (A POST without a session id is
// TestSessionMissingIDIsBadRequest.)
func testUnknownSession(t *testing.T, a, b *gw, record string) {
	t.Helper()
	init := rawMCPPost(t, a.MCP, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw-e2e","version":"1"}}}`)
	if init.status != http.StatusOK {
		t.Fatalf("initialize on A: %d\n%s", init.status, init.body)
	}
	sid := init.header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize on A answered no Mcp-Session-Id; headers %v", init.header)
	}
	if r := rawMCPPost(t, a.MCP, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.status != http.StatusAccepted {
		t.Fatalf("notifications/initialized on A: %d, want 202\n%s", r.status, r.body)
	}
	const list = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if r := rawMCPPost(t, a.MCP, sid, list); r.status != http.StatusOK || !strings.Contains(r.body, "t__echo_raw") {
		t.Fatalf("tools/list on A with its own session: %d, want 200 listing t__echo_raw\n%s", r.status, r.body)
	}

	const heldArgs = `{"case":"c04-on-b"}`
	for _, c := range []struct {
		name, url, sid, body string
		want                 int
	}{
		{"tools/list with A's session on B", b.MCP, sid, list, http.StatusNotFound},
		{"held tools/call with A's session on B", b.MCP, sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t__echo_raw","arguments":` + heldArgs + `}}`, http.StatusNotFound},
		{"made-up session on A", a.MCP, "nope", list, http.StatusNotFound},
		{"made-up session on B", b.MCP, "nope", list, http.StatusNotFound},
	} {
		r := rawMCPPost(t, c.url, c.sid, c.body)
		if r.status != c.want {
			t.Errorf("%s: %d, want %d\n%s", c.name, r.status, c.want, r.body)
		}
		if ct := r.header.Get("Content-Type"); strings.HasPrefix(ct, "text/event-stream") {
			t.Errorf("%s: answered with an SSE stream (%s), want a plain error", c.name, ct)
		}
	}
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		if r := rawMCP(t, method, b.MCP, sid, ""); r.status != http.StatusNotFound {
			t.Errorf("%s with A's session on B: %d, want 404\n%s", method, r.status, r.body)
		}
	}
	// The session still works on A (B's 404s did not end it).
	if r := rawMCPPost(t, a.MCP, sid, list); r.status != http.StatusOK {
		t.Errorf("tools/list on A after B's 404s: %d, want 200\n%s", r.status, r.body)
	}
	for _, p := range approvals(t, b.Admin, "all") {
		if strings.Contains(string(p.Arguments), "c04-on-b") {
			t.Errorf("the call sent to B with an unknown session created approval %s (%s)", p.ID, p.State)
		}
	}
	if n := countRecord(t, record, "echo_raw "+heldArgs); n != 0 {
		t.Errorf("the call sent to B with an unknown session ran %d times", n)
	}
	if r := rawMCP(t, http.MethodDelete, a.MCP, sid, ""); r.status != http.StatusNoContent {
		t.Errorf("DELETE of the session on A: %d, want 204\n%s", r.status, r.body)
	}
}

// TestSessionMissingIDIsBadRequest is the rest of case C04: a POST that is
// not initialize and carries no Mcp-Session-Id is answered 400 (the
// Streamable HTTP transport: "Servers that require a session ID SHOULD
// respond to requests without an Mcp-Session-Id header (other than
// initialization) with HTTP 400 Bad Request"), not 200 with a JSON-RPC error
// on an SSE stream, and a held call sent that way is never held or run.
func TestSessionMissingIDIsBadRequest(t *testing.T) {
	g, record := startUpstreamGateway(t, pgPolicy)
	const args = `{"case":"no-session"}`
	for _, c := range []struct{ name, body string }{
		{"tools/list", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
		{"held tools/call", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t__echo_raw","arguments":` + args + `}}`},
	} {
		r := rawMCPPost(t, g.MCP, "", c.body)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s without Mcp-Session-Id: %d (Content-Type %q), want 400\n%s", c.name, r.status, r.header.Get("Content-Type"), r.body)
		}
		if sid := r.header.Get("Mcp-Session-Id"); sid != "" {
			t.Errorf("%s without Mcp-Session-Id: the answer opened session %q", c.name, sid)
		}
	}
	if got := approvals(t, g.Admin, "all"); len(got) != 0 {
		t.Errorf("a call without a session created approvals: %+v", got)
	}
	if n := countRecord(t, record, "echo_raw "+args); n != 0 {
		t.Errorf("a call without a session ran %d times", n)
	}
}

// TestPostgresOutage stops and restarts a Postgres cluster of the test's
// own under two instances. While it is down a new gated call is refused at
// once with an error naming the store (the rule's 5m timeout would show as
// a test timeout), an allowed call still runs, /readyz says 503, and a call
// held before the outage keeps waiting; after the restart both instances
// are ready again, and an approval through the other instance still
// releases that call, once.
func TestPostgresOutage(t *testing.T) {
	cluster := startPGCluster(t)
	record := filepath.Join(t.TempDir(), "record.log")
	a := startPGGateway(t, cluster.DSN(), upstreamServer(record)+pgPolicy)
	b := startPGGateway(t, cluster.DSN(), upstreamServer(record)+pgPolicy)
	cs := a.connect(t, nil, nil)

	const heldArgs = `{"case":"held-through-restart"}`
	held := callAsync(t.Context(), cs, echoCall(heldArgs))
	p := waitPendingArgs(t, b.Admin, heldArgs)

	start := time.Now()
	cluster.Stop(t)
	elapsed(t, "postgres stopped", start)

	t.Run("gated call refused at once", func(t *testing.T) {
		defer elapsed(t, "gated call while Postgres is down", time.Now())
		msg := mustIsError(t, await(t, callAsync(t.Context(), cs, echoCall(`{"case":"while-down"}`))))
		if !strings.Contains(msg, "store") || !strings.Contains(msg, "unavailable") {
			t.Errorf("gated call while Postgres is down says %q, want it to say the approval store is unavailable", msg)
		}
	})
	t.Run("allowed call still runs", func(t *testing.T) {
		r := await(t, callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "t__big_result", Arguments: map[string]any{"case": "while-down"}}))
		mustOK(t, r)
		if n := countRecord(t, record, `big_result {"case":"while-down"}`); n != 1 {
			t.Errorf("allowed call ran %d times upstream, want 1", n)
		}
	})
	t.Run("readyz is not ready", func(t *testing.T) {
		for name, g := range map[string]*gw{"A": a, "B": b} {
			if status, body := plainGet(t, g.Admin+"/readyz"); status != http.StatusServiceUnavailable {
				t.Errorf("%s /readyz while Postgres is down: %d, want 503\n%s", name, status, body)
			}
			if status, _ := plainGet(t, g.Admin+"/healthz"); status != http.StatusOK {
				t.Errorf("%s /healthz while Postgres is down: %d, want 200 (the process is alive)", name, status)
			}
		}
	})
	select {
	case r := <-held:
		t.Fatalf("the held call returned while Postgres was down: (%v, %v)", r.res, r.err)
	default:
	}

	start = time.Now()
	cluster.Start(t)
	// The instances notice on their own: /readyz turns 200 again. (The
	// approval right after a restart, before that, is
	// TestPostgresConnectionsDropped.)
	waitReadyz(t, a.Admin)
	waitReadyz(t, b.Admin)
	elapsed(t, "postgres restarted, both instances ready", start)

	t.Run("approval after the restart releases the held call", func(t *testing.T) {
		defer elapsed(t, "approve through B after the restart, released on A", time.Now())
		mustReview(t, b.Admin, p.ID, "approve", "")
		if got := mustOK(t, await(t, held)); got != heldArgs {
			t.Errorf("held call returned %q, want %q", got, heldArgs)
		}
		if n := countRecord(t, record, "echo_raw "+heldArgs); n != 1 {
			t.Errorf("upstream ran the held call %d times, want 1", n)
		}
		if got := approvalAt(t, a.Admin, p.ID); got.State != "consumed" {
			t.Errorf("approval is %s, want consumed", got.State)
		}
	})
	t.Run("holding new calls again", func(t *testing.T) {
		const args = `{"case":"after-restart"}`
		ch := callAsync(t.Context(), cs, echoCall(args))
		q := waitPendingArgs(t, b.Admin, args)
		mustReview(t, b.Admin, q.ID, "approve", "")
		if got := mustOK(t, await(t, ch)); got != args {
			t.Errorf("call returned %q, want %q", got, args)
		}
	})
	for _, x := range approvals(t, a.Admin, "all") {
		if strings.Contains(string(x.Arguments), "while-down") {
			t.Errorf("the call refused while Postgres was down left approval %s (%s)", x.ID, x.State)
		}
	}
	if n := countRecord(t, record, `echo_raw {"case":"while-down"}`); n != 0 {
		t.Errorf("the call refused while Postgres was down ran %d times", n)
	}
}

// TestPostgresConnectionsDropped drops every connection of two instances
// at once, as a database restart or failover does (here with
// pg_terminate_backend, so the moment is exact), while a call is held on A.
// The database itself stays up, so the very next uses must work: an
// approval through B answers 200 and releases the call on A, and a new
// gated call on A is held rather than refused as "store unavailable".
func TestPostgresConnectionsDropped(t *testing.T) {
	dsn := freshPGDatabase(t, pgTestDSN(t))
	record := filepath.Join(t.TempDir(), "record.log")
	a := startPGGateway(t, dsn, upstreamServer(record)+pgPolicy)
	b := startPGGateway(t, dsn, upstreamServer(record)+pgPolicy)
	cs := a.connect(t, nil, nil)

	const heldArgs = `{"case":"held-through-drop"}`
	held := callAsync(t.Context(), cs, echoCall(heldArgs))
	p := waitPendingArgs(t, b.Admin, heldArgs)
	waitPendingArgs(t, a.Admin, heldArgs) // A's pool has just been used too

	n := pgTerminateOthers(t, dsn)
	t.Logf("terminated %d connections of the gateways", n)
	if n == 0 {
		t.Fatal("no gateway connection to terminate")
	}

	t.Run("approval through B right after the drop", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), waitFor(t))
		defer cancel()
		r := postReview(ctx, b.Admin, p.ID, "approve", "")
		if r.Err != nil || r.Status != http.StatusOK {
			t.Errorf("approve through B right after the database dropped its connections: status %d, err %v, want 200\n%s", r.Status, r.Err, r.Body)
			mustReview(t, b.Admin, p.ID, "approve", "") // try again, to release the call
		}
		if got := mustOK(t, await(t, held)); got != heldArgs {
			t.Errorf("held call returned %q, want %q", got, heldArgs)
		}
		if n := countRecord(t, record, "echo_raw "+heldArgs); n != 1 {
			t.Errorf("upstream ran the held call %d times, want 1", n)
		}
	})

	t.Run("gated call on A right after the drop", func(t *testing.T) {
		pgTerminateOthers(t, dsn)
		const args = `{"case":"gated-after-drop"}`
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		ch := callAsync(ctx, cs, echoCall(args))
		// Either it is held (and then denied here), or it comes back refused.
		deadline := time.Now().Add(waitFor(t))
		for {
			select {
			case r := <-ch:
				t.Fatalf("a gated call right after the database dropped its connections returned at once: (%v, %q), want it held", r.err, resultText(r))
			default:
			}
			// B may itself answer 503 here (the approval subtest); that
			// is not what this subtest checks, so keep polling.
			if l, err := tryApprovals(t.Context(), b.Admin, "pending"); err == nil {
				for _, q := range l {
					if strings.Contains(string(q.Arguments), "gated-after-drop") {
						mustReview(t, b.Admin, q.ID, "deny", "cleanup")
						mustIsError(t, await(t, ch))
						return
					}
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("gated call neither held nor answered after %v", waitFor(t))
			}
			time.Sleep(pollEvery)
		}
	})
}
