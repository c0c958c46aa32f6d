package notify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"toolgate/internal/approval"
	"toolgate/internal/config"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/sqlitetest"
	"toolgate/internal/telemetry"
)

// call is one Deliver call a recorder saw.
type call struct {
	At time.Time
	M  Message
}

// recorder is a Channel that records its calls and answers with answer
// (nil answers "", nil).
type recorder struct {
	mu     sync.Mutex
	calls  []call
	answer func(m Message) (string, error)
	// answerCtx, when set, answers instead of answer.
	answerCtx func(ctx context.Context) (string, error)
}

func (r *recorder) Deliver(ctx context.Context, m Message) (string, error) {
	r.mu.Lock()
	r.calls = append(r.calls, call{time.Now(), m})
	answer, answerCtx := r.answer, r.answerCtx
	r.mu.Unlock()
	if answerCtx != nil {
		return answerCtx(ctx)
	}
	if answer == nil {
		return "", nil
	}
	return answer(m)
}

func (r *recorder) got() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// failing answers errors for the first n calls, then succeeds.
func failing(n int) func(Message) (string, error) {
	var mu sync.Mutex
	return func(Message) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if n > 0 {
			n--
			return "", errors.New("receiver answered 500")
		}
		return "", nil
	}
}

// counts is a Metrics that counts outcomes per channel.
type counts struct {
	mu        sync.Mutex
	outcomes  map[string]int // "channel/outcome"
	latencies []float64
}

func (c *counts) Delivery(channel, outcome string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.outcomes == nil {
		c.outcomes = map[string]int{}
	}
	c.outcomes[channel+"/"+outcome]++
}

func (c *counts) Delivered(_ string, seconds float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.latencies = append(c.latencies, seconds)
}

func (c *counts) get() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.outcomes {
		out[k] = v
	}
	return out
}

// harness runs an Outbox over a real SQLite store inside a synctest
// bubble; stop ends Run and waits for it.
type harness struct {
	db   *sqlstore.DB
	box  *Outbox
	m    *counts
	stop func()
}

func start(t *testing.T, routes []Route, opts Options) *harness {
	t.Helper()
	h := &harness{db: sqlitetest.Open(t), m: &counts{}}
	opts.Metrics = h.m
	if opts.Jitter == nil {
		opts.Jitter = func() float64 { return 0 }
	}
	box, err := New(h.db, routes, &opts)
	if err != nil {
		t.Fatal(err)
	}
	h.box = box
	ctx, cancel := context.WithCancel(t.Context())
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		if err := box.Run(ctx); err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	h.stop = func() { cancel(); <-ended }
	t.Cleanup(h.stop)
	synctest.Wait() // idle: nothing of the outbox's competes with the test's writes
	return h
}

var requestN int

// request creates a pending request created now (so its requested event
// is at now) and returns it.
func (h *harness) request(t *testing.T, rule, server string) approval.Request {
	t.Helper()
	requestN++
	now := time.Now()
	r := approval.Request{
		ID: approval.ID(fmt.Sprintf("01900000-0000-7000-8000-%012x", requestN)), State: approval.StatePending,
		Server: server, Tool: "write", Arguments: []byte(`{"path":"a"}`), ArgumentsHash: "sha256:00", Rule: rule,
		RequestedBy: "agent-1", CreatedAt: now, ExpiresAt: now.Add(time.Hour), RequiredApprovals: 1,
	}
	if err := h.db.CreateRequest(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	h.box.Wake()
	return r
}

func (h *harness) approve(t *testing.T, id approval.ID) {
	t.Helper()
	if _, err := h.db.UpdateRequest(t.Context(), id, "bob", func(r *approval.Request) error {
		return r.Review(approval.Reviewer{ID: "bob"}, approval.VerdictApprove, "", "", time.Now())
	}); err != nil {
		t.Fatal(err)
	}
	h.box.Wake()
}

func (h *harness) deliveries(t *testing.T) []store.Delivery {
	t.Helper()
	ds, err := h.db.Deliveries(t.Context(), "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// TestRetriesWithBackoff: a receiver failing twice gets the same event id
// three times, at the backoff's times, and one delivery is counted.
func TestRetriesWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := &recorder{answer: failing(2)}
		h := start(t, []Route{{Name: "hook", Channel: ch, Events: []string{Requested}, MaxAge: time.Hour}},
			Options{Poll: time.Hour, Backoff: time.Second, BackoffMax: time.Minute, Jitter: func() float64 { return 0.5 }})
		t0 := time.Now()
		r := h.request(t, "writes", "fs")
		time.Sleep(time.Minute)
		synctest.Wait()
		calls := ch.got()
		if len(calls) != 3 {
			t.Fatalf("%d attempts, want 3", len(calls))
		}
		// Waits are drawn from [d/2, d) with d = 1s, 2s: at jitter 0.5,
		// 750ms and 1.5s.
		want := []time.Duration{0, 750 * time.Millisecond, 2250 * time.Millisecond}
		for i, c := range calls {
			if got := c.At.Sub(t0); got != want[i] {
				t.Errorf("attempt %d at +%v, want +%v", i+1, got, want[i])
			}
			if c.M.EventID != calls[0].M.EventID || c.M.EventID == "" {
				t.Errorf("attempt %d event id %q, want %q on every attempt", i+1, c.M.EventID, calls[0].M.EventID)
			}
			if c.M.Attempt != i+1 || c.M.Event.Type != approval.EventRequested || c.M.Request.ID != r.ID || c.M.Channel != "hook" {
				t.Errorf("attempt %d message = %+v", i+1, c.M)
			}
		}
		if diff := cmp.Diff(map[string]int{"hook/retried": 2, "hook/delivered": 1}, h.m.get()); diff != "" {
			t.Errorf("metrics (-want +got):\n%s", diff)
		}
		ds := h.deliveries(t)
		if len(ds) != 1 || ds[0].State != store.DeliveryDelivered || ds[0].Attempts != 3 || ds[0].LeaseOwner != "" {
			t.Errorf("deliveries = %+v, want one delivered after 3 attempts", ds)
		}
		if len(h.m.latencies) != 1 || h.m.latencies[0] != 2.25 {
			t.Errorf("latency = %v, want [2.25] seconds from the event", h.m.latencies)
		}
	})
}

// TestGivesUpAtMaxAge: a receiver that never answers is tried until
// max_age after the event, the last time at max_age, then counted failed.
func TestGivesUpAtMaxAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := &recorder{answer: func(Message) (string, error) { return "", errors.New("connection refused") }}
		h := start(t, []Route{{Name: "hook", Channel: ch, Events: []string{Requested}, MaxAge: 10 * time.Second}},
			Options{Poll: time.Hour, Backoff: time.Second, BackoffMax: 4 * time.Second})
		t0 := time.Now()
		h.request(t, "writes", "fs")
		time.Sleep(time.Hour)
		synctest.Wait()
		var at []time.Duration
		for _, c := range ch.got() {
			at = append(at, c.At.Sub(t0))
		}
		// Jitter 0: waits of d/2 with d = 1s, 2s, 4s, 4s, …; the last
		// attempt is moved to max_age.
		s := time.Second
		want := []time.Duration{0, s / 2, 3 * s / 2, 7 * s / 2, 11 * s / 2, 15 * s / 2, 19 * s / 2, 10 * s}
		if diff := cmp.Diff(want, at); diff != "" {
			t.Errorf("attempt times (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]int{"hook/retried": 7, "hook/failed": 1}, h.m.get()); diff != "" {
			t.Errorf("metrics (-want +got):\n%s", diff)
		}
		ds := h.deliveries(t)
		if len(ds) != 1 || ds[0].State != store.DeliveryFailed || ds[0].LastError != "connection refused" || !ds[0].DoneAt.Equal(t0.Add(10*s)) {
			t.Errorf("deliveries = %+v, want one failed at max_age", ds)
		}
	})
}

func TestRetryAfterAndPermanent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &recorder{answer: func(m Message) (string, error) {
			if m.Attempt == 1 {
				return "", RetryAfter(errors.New("rate limited"), 30*time.Second)
			}
			return "", nil
		}}
		gone := &recorder{answer: func(Message) (string, error) { return "", Permanent(errors.New("channel_not_found")) }}
		h := start(t, []Route{
			{Name: "slow", Channel: slow, Events: []string{Requested}, MaxAge: time.Hour},
			{Name: "gone", Channel: gone, Events: []string{Requested}, MaxAge: time.Hour},
		}, Options{Poll: time.Hour, Backoff: time.Second})
		t0 := time.Now()
		h.request(t, "writes", "fs")
		time.Sleep(time.Hour)
		synctest.Wait()
		if c := slow.got(); len(c) != 2 || c[1].At.Sub(t0) != 30*time.Second {
			t.Errorf("slow channel attempts = %v, want the second after the 30s asked for", c)
		}
		if c := gone.got(); len(c) != 1 {
			t.Errorf("permanent failure attempted %d times, want 1", len(c))
		}
		if diff := cmp.Diff(map[string]int{"slow/retried": 1, "slow/delivered": 1, "gone/failed": 1}, h.m.get()); diff != "" {
			t.Errorf("metrics (-want +got):\n%s", diff)
		}
	})
}

// TestInOrderPerRequest: a request's decision is not announced on a
// channel before its request was (even while that one is retried), and
// carries the ref the first delivery returned.
func TestInOrderPerRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fails := failing(3)
		ch := &recorder{answer: func(m Message) (string, error) {
			if m.Event.Type == approval.EventRequested {
				if _, err := fails(m); err != nil {
					return "", err
				}
				return "msg-" + string(m.Request.ID), nil
			}
			return "", nil
		}}
		h := start(t, []Route{{Name: "slack", Channel: ch, Events: []string{Requested, Decided}, MaxAge: time.Hour}}, Options{Poll: time.Hour})
		r := h.request(t, "writes", "fs")
		synctest.Wait()
		h.approve(t, r.ID)
		time.Sleep(time.Hour)
		synctest.Wait()
		var types []approval.EventType
		for _, c := range ch.got() {
			types = append(types, c.M.Event.Type)
		}
		want := []approval.EventType{approval.EventRequested, approval.EventRequested, approval.EventRequested, approval.EventRequested, approval.EventApproved}
		if diff := cmp.Diff(want, types); diff != "" {
			t.Fatalf("attempts (-want +got):\n%s", diff)
		}
		last := ch.got()[4].M
		if last.Ref != "msg-"+string(r.ID) || last.Event.State != approval.StateApproved || last.Request.State != approval.StateApproved {
			t.Errorf("decision message = %+v, want the first message's ref and the approved state", last)
		}
	})
}

// TestSkipsStaleEvents: an event older than max_age when first seen is not
// announced.
func TestSkipsStaleEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := &recorder{}
		h := start(t, []Route{{Name: "hook", Channel: ch, Events: []string{Requested, Decided}, MaxAge: time.Minute}}, Options{Poll: time.Hour})
		h.stop()
		r := h.request(t, "writes", "fs")
		time.Sleep(2 * time.Minute)
		h.approve(t, r.ID)
		ctx, cancel := context.WithCancel(t.Context())
		go func() { _ = h.box.Run(ctx) }()
		synctest.Wait()
		cancel()
		synctest.Wait()
		if c := ch.got(); len(c) != 1 || c[0].M.Event.Type != approval.EventApproved {
			t.Errorf("delivered %v, want only the fresh decision", c)
		}
		if diff := cmp.Diff(map[string]int{"hook/skipped": 1, "hook/delivered": 1}, h.m.get()); diff != "" {
			t.Errorf("metrics (-want +got):\n%s", diff)
		}
	})
}

// TestShutdownHandsBack: an attempt cut short by shutdown leaves the
// delivery pending and due, for the next run.
func TestShutdownHandsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := &recorder{answer: nil}
		ch.answer = func(Message) (string, error) { return "", errors.New("unused") }
		blocked := make(chan struct{})
		ch.answerCtx = func(ctx context.Context) (string, error) {
			close(blocked)
			<-ctx.Done() // answers only when the outbox gives up on it
			return "", ctx.Err()
		}
		h := start(t, []Route{{Name: "hook", Channel: ch, Events: []string{Requested}, MaxAge: time.Hour}}, Options{Poll: time.Hour, Timeout: 2 * time.Hour})
		h.request(t, "writes", "fs")
		<-blocked
		h.stop()
		ds := h.deliveries(t)
		if len(ds) != 1 || ds[0].State != store.DeliveryPending || ds[0].LeaseOwner != "" || ds[0].LastError != "interrupted by shutdown" || ds[0].NextAt.After(time.Now()) {
			t.Errorf("deliveries = %+v, want one pending, unleased and due", ds)
		}
		if m := h.m.get(); len(m) != 0 {
			t.Errorf("metrics = %v, want no outcome counted", m)
		}
	})
}

func TestRoutesSelect(t *testing.T) {
	r := approval.Request{Rule: "writes", Server: "fs"}
	ev := func(typ approval.EventType) approval.Event { return approval.Event{Type: typ} }
	defaults := Route{Events: config.DefaultNotifyEvents}
	cases := []struct {
		name    string
		route   Route
		ev      approval.Event
		outcome approval.Outcome
		want    bool
	}{
		{"event listed", Route{Events: []string{Requested}}, ev(approval.EventRequested), "", true},
		{"event not listed", Route{Events: []string{Requested}}, ev(approval.EventReviewed), "", false},
		{"decided covers approved", Route{Events: []string{Decided}}, ev(approval.EventApproved), "", true},
		{"decided covers denied", Route{Events: []string{Decided}}, ev(approval.EventDenied), "", true},
		{"decided is not expired", Route{Events: []string{Decided}}, ev(approval.EventExpired), "", false},
		{"rule listed", Route{Events: []string{Requested}, Rules: []string{"pay", "writes"}}, ev(approval.EventRequested), "", true},
		{"rule not listed", Route{Events: []string{Requested}, Rules: []string{"pay"}}, ev(approval.EventRequested), "", false},
		{"server listed", Route{Events: []string{Requested}, Servers: []string{"fs"}}, ev(approval.EventRequested), "", true},
		{"server not listed", Route{Events: []string{Requested}, Servers: []string{"pay"}}, ev(approval.EventRequested), "", false},
		// The approver must hear when what they approved did not run as
		// asked, or toolgate cannot say whether it ran; the defaults
		// announce that, not every successful run.
		{"defaults: outcome unknown", defaults, ev(approval.EventDispatched), approval.OutcomeUnknown, true},
		{"defaults: outcome tool_error", defaults, ev(approval.EventDispatched), approval.OutcomeToolError, true},
		{"defaults: outcome transport_error", defaults, ev(approval.EventDispatched), approval.OutcomeTransportError, true},
		{"defaults: outcome cancelled_after_dispatch", defaults, ev(approval.EventDispatched), approval.OutcomeCancelledAfterDispatch, true},
		{"defaults: outcome ok", defaults, ev(approval.EventDispatched), approval.OutcomeOK, false},
		{"defaults: invalidated", defaults, ev(approval.EventInvalidated), "", true},
		{"dispatched covers ok", Route{Events: []string{DispatchFailed, Dispatched}}, ev(approval.EventDispatched), approval.OutcomeOK, true},
		// grants51: a review leaving the request pending is announced by
		// the defaults; one that settled it only by its approved or denied
		// event, when the route announces that.
		{"defaults: review pending", defaults, approval.Event{Type: approval.EventReviewed, State: approval.StatePending}, "", true},
		{"defaults: review that approved", defaults, approval.Event{Type: approval.EventReviewed, State: approval.StateApproved}, "", false},
		{"defaults: review that denied", defaults, approval.Event{Type: approval.EventReviewed, State: approval.StateDenied}, "", false},
		{"reviewed alone: review that approved", Route{Events: []string{Reviewed}}, approval.Event{Type: approval.EventReviewed, State: approval.StateApproved}, "", true},
		{"reviewed and denied: review that approved", Route{Events: []string{Reviewed, Denied}}, approval.Event{Type: approval.EventReviewed, State: approval.StateApproved}, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.route.Name, c.route.Channel, c.route.MaxAge = "x", &recorder{}, time.Hour
			rt, err := newRoute(c.route)
			if err != nil {
				t.Fatal(err)
			}
			r := r
			r.DispatchOutcome = c.outcome
			if got := rt.selects(c.ev, r); got != c.want {
				t.Errorf("selects = %v, want %v", got, c.want)
			}
		})
	}
}

func TestNewRefusesBadRoutes(t *testing.T) {
	db := sqlitetest.Open(t)
	_, err := New(db, []Route{
		{Name: "a", Channel: &recorder{}, Events: []string{"approved_by_bob"}, MaxAge: time.Hour},
		{Name: "b", Events: []string{Requested}},
		{Name: "c", Channel: &recorder{}, Events: []string{Requested}, MaxAge: time.Hour},
		{Name: "c", Channel: &recorder{}, Events: []string{Requested}, MaxAge: time.Hour},
	}, nil)
	for _, want := range []string{`channel "a": unknown event "approved_by_bob"`, `channel "b": no channel`, `channel "b": max age 0s`, `channel "c": name used twice`} {
		if err == nil || !contains(err.Error(), want) {
			t.Errorf("New = %v, want it to say %q", err, want)
		}
	}
	if _, err := New(db, nil, nil); err == nil {
		t.Errorf("New without channels succeeded")
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestEventNamesMatchConfig holds the config's list of event names to the
// ones this package resolves.
func TestEventNamesMatchConfig(t *testing.T) {
	var names []string
	for n := range eventTypes {
		names = append(names, n)
	}
	slices.Sort(names)
	cfg := config.NotifyEvents()
	slices.Sort(cfg)
	if diff := cmp.Diff(cfg, names); diff != "" {
		t.Errorf("event names (-config +notify):\n%s", diff)
	}
	for _, e := range config.DefaultNotifyEvents {
		if _, ok := eventTypes[e]; !ok {
			t.Errorf("default event %q unknown", e)
		}
	}
}

// TestChannelOutcomesExportedAtZero: an operator alerts on the increase of
// toolgate_deliveries_total{outcome="failed"}; a series that first appears
// at 1 shows no increase, so every channel's outcomes are exported at 0
// as soon as the outbox exists.
func TestChannelOutcomesExportedAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	routes := []Route{
		{Name: "ops-hook", Channel: &recorder{}, Events: []string{Requested}, MaxAge: time.Hour},
		{Name: "slack-ops", Channel: &recorder{}, Events: []string{Requested}, MaxAge: time.Hour},
	}
	if _, err := New(sqlitetest.Open(t), routes, &Options{Metrics: telemetry.NewDeliveryMetrics(reg)}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "toolgate_deliveries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ch, outcome string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "channel":
					ch = l.GetValue()
				case "outcome":
					outcome = l.GetValue()
				}
			}
			got[ch+" "+outcome] = m.GetCounter().GetValue() == 0
		}
	}
	for _, r := range routes {
		for _, o := range []string{OutcomeDelivered, OutcomeRetried, OutcomeFailed, OutcomeSkipped} {
			if zero, ok := got[r.Name+" "+o]; !ok || !zero {
				t.Errorf("toolgate_deliveries_total{channel=%q,outcome=%q}: present %v at 0 %v, want present at 0", r.Name, o, ok, zero)
			}
		}
	}
}

// TestLeaseRenewedWhileAttempting: an attempt that takes longer than the
// lease keeps it (renewed, never more than Lease ahead) so no other
// instance claims the delivery meanwhile; once the attempt's outcome is
// recorded the lease is released and the event was sent once. Before
// branch revise38 the lease was 2×Timeout+5s from the claim: an hour here.
func TestLeaseRenewedWhileAttempting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 5 * time.Second // DefaultLease
		release := make(chan struct{})
		ch := &recorder{answerCtx: func(ctx context.Context) (string, error) {
			<-release
			return "", nil
		}}
		h := start(t, []Route{{Name: "hook", Channel: ch, Events: []string{Requested}, MaxAge: time.Hour}}, Options{Poll: time.Hour, Timeout: time.Hour}) // the default Lease
		h.request(t, "writes", "fs")
		for range 12 { // a minute of an attempt under way
			time.Sleep(lease)
			synctest.Wait()
			ds := h.deliveries(t)
			if len(ds) != 1 || ds[0].LeaseOwner == "" || !ds[0].LeaseUntil.After(time.Now()) || ds[0].LeaseUntil.After(time.Now().Add(lease)) {
				t.Fatalf("at %v: deliveries = %+v, want one leased until at most %v ahead", time.Now(), ds, lease)
			}
			if got, err := h.db.ClaimDeliveries(t.Context(), "other", time.Now(), time.Now().Add(lease), 0); err != nil || len(got) != 0 {
				t.Fatalf("another instance claimed %+v, %v while the attempt is under way", got, err)
			}
		}
		close(release)
		synctest.Wait()
		if ds := h.deliveries(t); len(ds) != 1 || ds[0].State != store.DeliveryDelivered || ds[0].LeaseOwner != "" || ds[0].Attempts != 1 {
			t.Errorf("deliveries = %+v, want one delivered on its first attempt", ds)
		}
		if n := len(ch.got()); n != 1 {
			t.Errorf("sent %d times, want once", n)
		}
	})
}

// renewDown is a Store whose lease renewals fail while down is set, and
// whose claims fail too when claimsDown is.
type renewDown struct {
	*sqlstore.DB
	mu               sync.Mutex
	down, claimsDown bool
}

func (s *renewDown) set(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

func (s *renewDown) isDown(claim bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.down && (!claim || s.claimsDown)
}

var errUnreachable = errors.New("store unreachable")

func (s *renewDown) RenewDelivery(ctx context.Context, id int64, owner string, leaseUntil time.Time) error {
	if s.isDown(false) {
		return errUnreachable
	}
	return s.DB.RenewDelivery(ctx, id, owner, leaseUntil)
}

func (s *renewDown) ClaimDeliveries(ctx context.Context, owner string, now, leaseUntil time.Time, limit int) ([]store.Delivery, error) {
	if s.isDown(true) {
		return nil, errUnreachable
	}
	return s.DB.ClaimDeliveries(ctx, owner, now, leaseUntil, limit)
}

// startDown runs an Outbox with one route over a renewDown store in a
// synctest bubble, answering with answer; Run ends at the test's end.
func startDown(t *testing.T, lease time.Duration, answer func(ctx context.Context) (string, error)) (*harness, *renewDown, *recorder) {
	t.Helper()
	db := &renewDown{DB: sqlitetest.Open(t)}
	ch := &recorder{answerCtx: answer}
	m := &counts{}
	box, err := New(db, []Route{{Name: "hook", Channel: ch, Events: []string{Requested}, MaxAge: time.Hour}},
		&Options{Poll: time.Hour, Timeout: time.Hour, Lease: lease, Metrics: m, Jitter: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		_ = box.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-ended })
	synctest.Wait()
	return &harness{db: db.DB, box: box, m: m}, db, ch
}

// TestLostLeaseCancelsAttempt: when this instance's renewals fail for a
// whole lease and another instance claims the delivery, the attempt under
// way is cancelled (the delivery is the other instance's now) and this
// instance records no outcome over the other's lease. Before, the attempt
// went on until its timeout and could deliver the event a second time.
func TestLostLeaseCancelsAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 2 * time.Second
		cause := make(chan error, 1)
		h, db, ch := startDown(t, lease, func(ctx context.Context) (string, error) {
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return "", ctx.Err()
		})
		db.claimsDown = true // the store is unreachable from this instance
		h.request(t, "writes", "fs")
		synctest.Wait()
		if n := len(ch.got()); n != 1 {
			t.Fatalf("attempts under way = %d, want 1", n)
		}
		db.set(true)
		time.Sleep(lease + time.Millisecond) // the lease lapses: no renewal got through
		synctest.Wait()
		got, err := db.DB.ClaimDeliveries(t.Context(), "other", time.Now(), time.Now().Add(time.Hour), 0)
		if err != nil || len(got) != 1 {
			t.Fatalf("the other instance claimed %+v, %v; want the lapsed delivery", got, err)
		}
		db.set(false)
		select {
		case c := <-cause:
			if !errors.Is(c, errLeaseLost) {
				t.Errorf("attempt ended with cause %v, want %v", c, errLeaseLost)
			}
		case <-time.After(time.Minute):
			t.Fatal("the attempt went on after the lease was lost")
		}
		synctest.Wait()
		ds := h.deliveries(t)
		if len(ds) != 1 || ds[0].LeaseOwner != "other" || ds[0].State != store.DeliveryPending || ds[0].Attempts != 2 {
			t.Errorf("deliveries = %+v, want one still leased to the other instance, untouched by this one", ds)
		}
		if c := h.m.get(); len(c) != 0 {
			t.Errorf("outcomes counted = %v, want none (the other instance records the outcome)", c)
		}
	})
}

// TestReclaimedOwnDeliveryNotAttemptedTwice: when this instance's renewals
// failed for a whole lease but its claims get through, it claims its own
// lapsed delivery again while the first attempt is still under way; the
// attempt under way keeps it and no second attempt starts. Before, the
// same instance sent the event twice at once.
func TestReclaimedOwnDeliveryNotAttemptedTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 2 * time.Second
		release := make(chan struct{})
		h, db, ch := startDown(t, lease, func(ctx context.Context) (string, error) {
			<-release
			return "", nil
		})
		h.request(t, "writes", "fs")
		synctest.Wait()
		db.set(true) // renewals fail; claims get through
		time.Sleep(3 * lease)
		synctest.Wait()
		if ds := h.deliveries(t); len(ds) != 1 || ds[0].Attempts < 2 {
			t.Fatalf("deliveries = %+v, want one claimed again by this instance after its lease lapsed", ds)
		}
		db.set(false)
		close(release)
		synctest.Wait()
		if n := len(ch.got()); n != 1 {
			t.Errorf("sent %d times, want once", n)
		}
		if ds := h.deliveries(t); len(ds) != 1 || ds[0].State != store.DeliveryDelivered {
			t.Errorf("deliveries = %+v, want one delivered", ds)
		}
	})
}
