package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/notify/webhook"
)

// hookSecret signs the test webhooks (HOOK_SECRET in the gateway's
// environment); the URL comes in HOOK_URL.
const hookSecret = "e2e-webhook-secret-3b9f"

// hookAttempt is one request the receiver got.
type hookAttempt struct {
	At       time.Time
	EventID  string
	Attempt  string
	SigError error // webhook.Verify's verdict on the signature
	Body     webhook.Body
	Raw      string
	Status   int // what the receiver answered
}

// hookReceiver is a webhook receiver on 127.0.0.1 that verifies every
// signature, answers 500 to the first failFirst attempts of each event id
// and 200 after, and records everything. Changes wakes waiters.
type hookReceiver struct {
	URL       string
	failFirst int

	mu       sync.Mutex
	attempts []hookAttempt
	perEvent map[string]int
	changed  chan struct{} // closed and replaced on every attempt
}

func startHookReceiver(t *testing.T, failFirst int) *hookReceiver {
	t.Helper()
	h := &hookReceiver{failFirst: failFirst, perEvent: map[string]int{}, changed: make(chan struct{})}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	h.URL = srv.URL + "/hooks/e2e-path-token"
	return h
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	a := hookAttempt{At: time.Now(), EventID: r.Header.Get(webhook.HeaderEventID), Attempt: r.Header.Get(webhook.HeaderAttempt), Raw: string(raw)}
	a.SigError = webhook.Verify([]byte(hookSecret), r.Header.Get(webhook.HeaderSignature), raw, time.Now(), webhook.Tolerance)
	_ = json.Unmarshal(raw, &a.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.perEvent[a.EventID]++
	a.Status = http.StatusOK
	if h.perEvent[a.EventID] <= h.failFirst {
		a.Status = http.StatusInternalServerError
	}
	h.attempts = append(h.attempts, a)
	close(h.changed)
	h.changed = make(chan struct{})
	w.WriteHeader(a.Status)
}

// waitEvent waits until the receiver has accepted (answered 200) a
// correctly signed event of approval id with type typ and dispatch outcome
// outcome ("" matches any outcome); it fails the test listing the
// "type/outcome" of every attempt for id it got instead.
func (h *hookReceiver) waitEvent(t *testing.T, id, typ, outcome string) {
	t.Helper()
	deadline := time.After(waitFor(t))
	for {
		h.mu.Lock()
		var got []string
		found := false
		for _, a := range h.attempts {
			if a.Body.Approval.ID != id {
				continue
			}
			got = append(got, a.Body.Type+"/"+a.Body.Approval.DispatchOutcome)
			found = found || (a.Body.Type == typ && (outcome == "" || a.Body.Approval.DispatchOutcome == outcome) &&
				a.Status == http.StatusOK && a.SigError == nil)
		}
		changed := h.changed
		h.mu.Unlock()
		if found {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the receiver got %v for approval %s, want a signed %s event (outcome %q)", got, id, typ, outcome)
		}
	}
}

// waitAccepted waits until the receiver has accepted (answered 200) n
// distinct events, and returns every attempt so far.
func (h *hookReceiver) waitAccepted(t *testing.T, n int) []hookAttempt {
	t.Helper()
	deadline := time.After(waitFor(t))
	for {
		h.mu.Lock()
		accepted := map[string]bool{}
		for _, a := range h.attempts {
			if a.Status == http.StatusOK {
				accepted[a.EventID] = true
			}
		}
		got, changed := append([]hookAttempt(nil), h.attempts...), h.changed
		h.mu.Unlock()
		if len(accepted) >= n {
			return got
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the receiver accepted %d events, want %d, after %v", len(accepted), n, waitFor(t))
		}
	}
}

// notifyPolicy holds t__echo_raw (rule "echo needs approval", which may be
// decided from chat) and t__progress (rule "progress needs approval",
// which may not).
const notifyPolicy = `
policy:
  default: deny
  rules:
    - name: echo needs approval
      server: t
      tools: [echo_raw]
      effect: approve
      chat_approval: true
      approval: { timeout: 1m }
    - name: progress needs approval
      server: t
      tools: [progress]
      effect: approve
      approval: { timeout: 1m }
`

// webhookSection configures one webhook channel "hook" with the given
// extra keys (indented for a channel entry) and fast retries.
func webhookSection(extra string) string {
	return `
notify:
  poll: 100ms
  backoff: 200ms
  backoff_max: 1s
  channels:
    - name: hook
      type: webhook
      url_env: HOOK_URL
      secret_env: HOOK_SECRET
      events: [requested, decided]
` + extra
}

// TestWebhookRetriedAndSigned: a receiver that answers 500 twice then 200
// gets each event three times, with the same event id, growing waits and
// valid signatures, and accepts it once; the held call is unaffected.
func TestWebhookRetriedAndSigned(t *testing.T) {
	rc := startHookReceiver(t, 2)
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	cfg := gatewayConfig(filepath.Join(dir, "toolgate.db"), upstreamServer(record)+notifyPolicy+`
approvals:
  public_url: https://toolgate.example/base
`+webhookSection(""))
	g := startGateway(t, cfg, map[string]string{"HOOK_URL": rc.URL, "HOOK_SECRET": hookSecret})
	cs := g.connect(t, nil, nil)

	args := `{"n":1,"password":"hunter2-raw-secret"}`
	ch := callAsync(t.Context(), cs, toolCall("t__echo_raw", args))
	p := waitPending(t, g.Admin, 1)[0]
	mustReview(t, g.Admin, p.ID, "approve", "")
	if out := mustOK(t, await(t, ch)); !strings.Contains(out, "hunter2-raw-secret") {
		t.Errorf("the upstream did not get the raw arguments: %s", out)
	}

	attempts := rc.waitAccepted(t, 2)
	byEvent := map[string][]hookAttempt{}
	var order []string
	for _, a := range attempts {
		if _, seen := byEvent[a.EventID]; !seen {
			order = append(order, a.EventID)
		}
		byEvent[a.EventID] = append(byEvent[a.EventID], a)
	}
	if len(order) != 2 {
		t.Fatalf("events %v, want requested and approved", order)
	}
	for k, id := range order {
		as := byEvent[id]
		wantType := []string{"requested", "approved"}[k]
		if len(as) != 3 {
			t.Errorf("%s: %d attempts, want 3 (500, 500, 200)", wantType, len(as))
			continue
		}
		for i, a := range as {
			if a.SigError != nil {
				t.Errorf("%s attempt %d: signature: %v", wantType, i+1, a.SigError)
			}
			if a.Attempt != strconv.Itoa(i+1) || a.Body.ID != id || a.Body.Type != wantType || a.Body.Approval.ID != p.ID {
				t.Errorf("%s attempt %d: header attempt %s, body id %s type %s approval %s", wantType, i+1, a.Attempt, a.Body.ID, a.Body.Type, a.Body.Approval.ID)
			}
			if strings.Contains(a.Raw, "hunter2") {
				t.Errorf("%s attempt %d: the body carries the raw password:\n%s", wantType, i+1, a.Raw)
			}
		}
		// Backoff 200ms: the waits are drawn from [100ms, 200ms), then
		// [200ms, 400ms).
		if d := as[1].At.Sub(as[0].At); d < 100*time.Millisecond {
			t.Errorf("%s: second attempt %v after the first, want at least 100ms", wantType, d)
		}
		if d := as[2].At.Sub(as[1].At); d < 200*time.Millisecond {
			t.Errorf("%s: third attempt %v after the second, want at least 200ms", wantType, d)
		}
		last := as[2].Body
		if last.InboxURL != "https://toolgate.example/base/ui/approvals/"+p.ID || last.Approval.Rule != "echo needs approval" || last.Approval.RequestedBy != agentID {
			t.Errorf("%s: inbox_url %q rule %q requested_by %q", wantType, last.InboxURL, last.Approval.Rule, last.Approval.RequestedBy)
		}
		if !strings.Contains(string(last.Approval.Arguments), `"password":"[redacted`) {
			t.Errorf("%s: arguments %s, want the display copy with the password redacted", wantType, last.Approval.Arguments)
		}
	}
	if st := byEvent[order[1]][2].Body.State; st != "approved" {
		t.Errorf("the decision's state = %q, want approved", st)
	}
	waitMetric(t, g.Admin, `toolgate_deliveries_total{channel="hook",outcome="delivered"}`, 2)
	m := scrapeMetrics(t, g.Admin)
	if got := m[`toolgate_deliveries_total{channel="hook",outcome="retried"}`]; got != 4 {
		t.Errorf("retried = %v, want 4", got)
	}
	if got := m[`toolgate_delivery_latency_seconds_count{channel="hook"}`]; got != 2 {
		t.Errorf("latency observations = %v, want 2", got)
	}
	if strings.Contains(g.stderr.String(), "e2e-path-token") || strings.Contains(g.stderr.String(), hookSecret) {
		t.Errorf("the log holds the webhook URL or secret")
	}
}

// waitMetric polls admin's /metrics until series reaches want.
func waitMetric(t *testing.T, admin, series string, want float64) {
	t.Helper()
	deadline := time.Now().Add(waitFor(t))
	for {
		got := scrapeMetrics(t, admin)[series]
		if got >= want {
			if got > want {
				t.Errorf("%s = %v, want %v", series, got, want)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v after %v, want %v", series, got, waitFor(t), want)
		}
		time.Sleep(pollEvery)
	}
}

// TestWebhookDownPastMaxAge: with nobody listening at the webhook's URL,
// calls are held, decided and run as ever; each event is retried until
// max_age and then counted failed.
func TestWebhookDownPastMaxAge(t *testing.T) {
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/hooks"
	_ = ln.Close()
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	cfg := gatewayConfig(filepath.Join(dir, "toolgate.db"), upstreamServer(record)+notifyPolicy+webhookSection("      max_age: 2s\n"))
	g := startGateway(t, cfg, map[string]string{"HOOK_URL": down, "HOOK_SECRET": hookSecret})
	cs := g.connect(t, nil, nil)

	for i := range 2 {
		args := fmt.Sprintf(`{"n":%d}`, i)
		ch := callAsync(t.Context(), cs, toolCall("t__echo_raw", args))
		p := awaitPendingArgs(t, g.Admin, args)
		mustReview(t, g.Admin, p.ID, "approve", "")
		mustOK(t, await(t, ch))
		if a := fetchApproval(t, g.Admin, p.ID); a.State != "consumed" || a.DispatchOutcome != "ok" {
			t.Errorf("approval %s: %s/%s, want consumed/ok", p.ID, a.State, a.DispatchOutcome)
		}
	}
	if got := countLines(readRecord(t, record), `echo_raw {"n":0}`) + countLines(readRecord(t, record), `echo_raw {"n":1}`); got != 2 {
		t.Errorf("the upstream ran %d times, want 2", got)
	}
	waitMetric(t, g.Admin, `toolgate_deliveries_total{channel="hook",outcome="failed"}`, 4)
	m := scrapeMetrics(t, g.Admin)
	if m[`toolgate_deliveries_total{channel="hook",outcome="delivered"}`] != 0 || m[`toolgate_deliveries_total{channel="hook",outcome="retried"}`] < 4 {
		t.Errorf("delivered %v retried %v, want none delivered and every event retried",
			m[`toolgate_deliveries_total{channel="hook",outcome="delivered"}`], m[`toolgate_deliveries_total{channel="hook",outcome="retried"}`])
	}
	g.waitLog(t, "notification failed; giving up", "channel=hook")
}

// TestWebhookTwoInstancesPostgres: two gateways on one Postgres, with one
// receiver: every event of calls held on either is delivered, none twice.
func TestWebhookTwoInstancesPostgres(t *testing.T) {
	dsn := freshPGDatabase(t, pgTestDSN(t))
	rc := startHookReceiver(t, 0)
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	body := upstreamServer(record) + notifyPolicy + webhookSection("")
	env := map[string]string{"DATABASE_URL": dsn, "HOOK_URL": rc.URL, "HOOK_SECRET": hookSecret}
	a := startGateway(t, pgGatewayConfig(body), env)
	b := startGateway(t, pgGatewayConfig(body), env)
	gws := []*gw{a, b}
	sessions := []*mcp.ClientSession{a.connect(t, nil, nil), b.connect(t, nil, nil)}

	const calls = 8
	var ids []string
	for i := range calls {
		args := fmt.Sprintf(`{"instance":%d,"n":%d}`, i%2, i)
		ch := callAsync(t.Context(), sessions[i%2], toolCall("t__echo_raw", args))
		p := awaitPendingArgs(t, gws[i%2].Admin, args)
		mustReview(t, gws[(i+1)%2].Admin, p.ID, "approve", "") // decided through the other instance
		mustOK(t, await(t, ch))
		ids = append(ids, p.ID)
	}
	attempts := rc.waitAccepted(t, 2*calls)
	seen := map[string]int{}
	types := map[string][]string{}
	for _, at := range attempts {
		seen[at.EventID]++
		if at.SigError != nil {
			t.Errorf("event %s: signature: %v", at.EventID, at.SigError)
		}
		types[at.Body.Approval.ID] = append(types[at.Body.Approval.ID], at.Body.Type)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("event %s delivered %d times, want once", id, n)
		}
	}
	for _, id := range ids {
		if got := strings.Join(types[id], ","); got != "requested,approved" {
			t.Errorf("approval %s: events %q, want requested,approved in order", id, got)
		}
	}
	// The outbox agrees: one attempt each, all delivered, and nothing left
	// to deliver again later.
	ctx, cancel := context.WithTimeout(t.Context(), waitFor(t))
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	// The receiver has the last body before its sender has read the
	// response and marked the row delivered: ask until the rows settle.
	var rows, delivered, once int
	for deadline := time.Now().Add(waitFor(t)); ; time.Sleep(pollEvery) {
		if err := conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'delivered'), count(*) FILTER (WHERE attempts = 1) FROM deliveries`).Scan(&rows, &delivered, &once); err != nil {
			t.Fatal(err)
		}
		if delivered >= 2*calls || time.Now().After(deadline) {
			break
		}
	}
	if rows != 2*calls || delivered != rows || once != rows {
		t.Errorf("deliveries: %d rows, %d delivered, %d with one attempt; want %d of each", rows, delivered, once, 2*calls)
	}
	key := `toolgate_deliveries_total{channel="hook",outcome="delivered"}`
	var ma, mb map[string]float64
	for deadline := time.Now().Add(waitFor(t)); ; time.Sleep(pollEvery) {
		ma, mb = scrapeMetrics(t, a.Admin), scrapeMetrics(t, b.Admin)
		if ma[key]+mb[key] >= 2*calls || time.Now().After(deadline) {
			break
		}
	}
	if ma[key]+mb[key] != 2*calls {
		t.Errorf("delivered counted %v + %v, want %d in total", ma[key], mb[key], 2*calls)
	}
	t.Logf("deliveries by instance: A %v, B %v", ma[key], mb[key])
}
