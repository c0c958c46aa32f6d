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
// over once its lease (2 × notify.timeout + 5 s) lapses and sends the same
// event again, with the same Toolgate-Event-Id and the next attempt
// number: the documented at-least-once duplicate ("an instance died after
// the receiver answered but before the answer was recorded"). No other
// event is sent twice.
func TestDeliveryOfKilledInstance(t *testing.T) {
	dsn := freshPGDatabase(t, pgTestDSN(t))
	rc := startHangingReceiver(t)
	record := filepath.Join(t.TempDir(), "record.log")
	cfg := pgGatewayConfig(auditorYAML + upstreamServer(record) + multiPolicy + `
notify:
  poll: 100ms
  backoff: 100ms
  timeout: 2s
  channels:
    - name: hook
      type: webhook
      url_env: HOOK_URL
      secret_env: HOOK_SECRET
      events: [requested, decided]
`)
	env := multiEnv(dsn, rc.URL)
	a, killA := startKillableGateway(t, cfg, env)
	b, killB := startKillableGateway(t, cfg, env)

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
		killA()
	case b.cmd.Process.Pid:
		killB()
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
