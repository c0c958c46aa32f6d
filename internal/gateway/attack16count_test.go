package gateway

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// rawSession0326 opens a session of protocol 2025-03-26 (the last that
// may send a JSON-RPC batch) on f's gateway with raw HTTP, as alice, and
// returns its id.
func rawSession0326(t *testing.T, f *countFixture) string {
	t.Helper()
	const init = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"attack16","version":"1"}}}`
	ex, b := sessionExchange(t, http.MethodPost, f.base, aliceToken, "", "", strings.NewReader(init))
	sid := ex.Header.Get("Mcp-Session-Id")
	if ex.StatusCode != http.StatusOK || sid == "" || !strings.Contains(string(b), `"2025-03-26"`) {
		t.Fatalf("initialize 2025-03-26: %d, session %q: %s", ex.StatusCode, sid, b)
	}
	ex, b = sessionExchange(t, http.MethodPost, f.base, aliceToken, sid, "2025-03-26",
		strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if ex.StatusCode/100 != 2 {
		t.Fatalf("notifications/initialized: %d: %s", ex.StatusCode, b)
	}
	waitInitialized(t, f.g, sid)
	return sid
}

// heldBatch is a JSON-RPC batch of two calls the gate holds (big 2 and
// big 3) and one it allows (echo).
const heldBatch = `[` +
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__big","arguments":{"n":2}}},` +
	`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__big","arguments":{"n":3}}},` +
	`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"up__echo","arguments":{"a":1}}}]`

// postBatch sends heldBatch on sid in the background with ctx; the
// channel gets the answer's whole body (or the error that ended it).
func postBatch(t *testing.T, ctx context.Context, f *countFixture, sid string) chan string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.base+"/mcp", strings.NewReader(heldBatch))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Authorization": "Bearer " + aliceToken, "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-03-26",
		"Content-Type": "application/json", "Accept": "application/json, text/event-stream"} {
		req.Header.Set(k, v)
	}
	done := make(chan string, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- "error: " + err.Error()
			return
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			b = append(b, "\nerror: "+err.Error()...)
		}
		done <- string(b)
	}()
	return done
}

// pendingByN waits until the gate holds both of heldBatch's big calls
// and returns their requests' ids by their argument n.
func pendingByN(t *testing.T, f *countFixture) map[int]approval.ID {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		rs, _, err := f.db.ListRequests(t.Context(), store.Filter{State: approval.StatePending})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 2 {
			ids := map[int]approval.ID{}
			for _, r := range rs {
				switch string(r.Arguments) {
				case `{"n":2}`:
					ids[2] = r.ID
				case `{"n":3}`:
					ids[3] = r.ID
				}
			}
			if len(ids) != 2 {
				t.Fatalf("pending requests' arguments: %s, %s", rs[0].Arguments, rs[1].Arguments)
			}
			return ids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pending requests, want 2", len(rs))
		}
		time.Sleep(time.Millisecond)
	}
}

// review decides the request id with verdict v, as carol.
func review(t *testing.T, f *countFixture, id approval.ID, v approval.Verdict) {
	t.Helper()
	if _, err := f.gt.Review(t.Context(), id, approval.Principal{ID: "carol", Kind: "human"}, v, "", ""); err != nil {
		t.Fatal(err)
	}
}

// notNegative fails t when Options.Load counts fewer than no calls: a
// count taken back twice (procs.Follow would believe the process idle).
func notNegative(t *testing.T, f *countFixture, when string) {
	t.Helper()
	if n, _ := f.load.InFlight(); n < 0 {
		t.Fatalf("%s: Options.Load counts %d calls in flight", when, n)
	}
}

// TestSDKPathHeldBatchCount: a JSON-RPC batch (2025-03-26) carrying two
// calls the gate holds and one it allows takes its POST out of
// Options.Load once while either is held, whatever order the two are
// decided in (the later first here, and one denied), and once the POST
// has been answered nothing is counted: the count neither stays behind
// nor is taken back twice (attack16).
func TestSDKPathHeldBatchCount(t *testing.T) {
	for _, tc := range []struct {
		name    string
		first   int
		v2, v3  approval.Verdict
		results []string
	}{
		{"later approved first", 3, approval.VerdictApprove, approval.VerdictApprove, []string{bigText(2), bigText(3)}},
		{"earlier approved first", 2, approval.VerdictApprove, approval.VerdictApprove, []string{bigText(2), bigText(3)}},
		{"one denied", 3, approval.VerdictApprove, approval.VerdictDeny, []string{bigText(2), "denied by carol"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newCountFixture(t)
			sid := rawSession0326(t, f)
			if n := f.inFlight(t); n != 0 {
				t.Fatalf("in flight before the batch: %d, want 0", n)
			}
			done := postBatch(t, t.Context(), f, sid)
			ids := pendingByN(t, f)
			f.waitUncounted(t) // both held: the POST is out of the count
			verdict := map[int]approval.Verdict{2: tc.v2, 3: tc.v3}
			second := 5 - tc.first
			review(t, f, ids[tc.first], verdict[tc.first])
			notNegative(t, f, "one of two held calls decided")
			review(t, f, ids[second], verdict[second])
			var body string
			select {
			case body = <-done:
			case <-time.After(testWait):
				t.Fatal("the batch was not answered")
			}
			for _, want := range append(tc.results, `"id":3`, `"id":1`, `"id":2`) {
				if !strings.Contains(body, want) {
					t.Errorf("batch answer lacks %q: %s", want, body)
				}
			}
			waitNoCalls(t, f.g)
			if n := f.inFlight(t); n != 0 {
				t.Fatalf("in flight after the batch was answered: %d, want 0", n)
			}
		})
	}
}

// TestSDKPathHeldBatchClientGone: the agent goes away (its POST ends)
// while both held calls of its batch wait; they wait out the drop grace
// and are then decided. The POST's count is back in before the front
// counts it out, so once nothing is served nothing is counted, at every
// step after the POST ended and after each decision (attack16).
func TestSDKPathHeldBatchClientGone(t *testing.T) {
	f := newCountFixture(t)
	sid := rawSession0326(t, f)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := postBatch(t, ctx, f, sid)
	ids := pendingByN(t, f)
	f.waitUncounted(t)
	cancel() // the agent goes away
	select {
	case <-done:
	case <-time.After(testWait):
		t.Fatal("the cancelled POST did not end")
	}
	if n := f.inFlight(t); n != 0 {
		t.Fatalf("in flight once the POST ended with two calls held: %d, want 0", n)
	}
	review(t, f, ids[3], approval.VerdictApprove)
	notNegative(t, f, "the first held call approved after its POST ended")
	review(t, f, ids[2], approval.VerdictDeny)
	waitNoCalls(t, f.g)
	if n := f.inFlight(t); n != 0 {
		t.Fatalf("in flight once both calls were decided: %d, want 0", n)
	}
	notNegative(t, f, "the end")
}
