package notify_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/config"
	"toolgate/internal/notify"
	"toolgate/internal/notify/webhook"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// hookLog is an httptest webhook receiver that records the type and
// actor of every event and signals each arrival.
type hookLog struct {
	mu   sync.Mutex
	got  []string // "type by actor (state)"
	seen chan struct{}
}

func (h *hookLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var b webhook.Body
	if err := json.Unmarshal(raw, &b); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.got = append(h.got, b.Type+" by "+b.Actor+" ("+b.State+")")
	h.mu.Unlock()
	w.WriteHeader(http.StatusOK)
	h.seen <- struct{}{}
}

func (h *hookLog) list() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.got)
}

// TestDefaultEventsTellTheSecondApprover (grants51): a webhook channel
// that lists no events (config's defaults) announces the first approval of
// a request needing two ("reviewed" by bob, still pending), so the second
// approver hears it; the second review, which settles the request, is
// announced once, as "approved", not also as "reviewed". A real SQLite
// store, the outbox and the webhook channel posting to an httptest
// server. On a2628f8c the receiver got requested and approved only.
func TestDefaultEventsTellTheSecondApprover(t *testing.T) {
	db := sqlitetest.Open(t)
	h := &hookLog{seen: make(chan struct{}, 16)}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	hook, err := webhook.New(srv.URL, "defaults51-secret", nil)
	if err != nil {
		t.Fatal(err)
	}
	ch := config.NotifyChannel{Name: "ops", Type: config.ChannelWebhook}
	box, err := notify.New(db, []notify.Route{{Name: ch.Name, Channel: hook, Events: ch.EffectiveEvents(), MaxAge: ch.EffectiveMaxAge()}},
		&notify.Options{Poll: 20 * time.Millisecond})
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

	now := time.Now()
	r := approval.Request{
		ID: approval.ID("01900000-0000-7000-8000-000000000051"), State: approval.StatePending,
		Server: "pay", Tool: "refund", Arguments: []byte(`{"amount":500}`), ArgumentsHash: "sha256:00", Rule: "two approve refunds",
		RequestedBy: "agent-1", CreatedAt: now, ExpiresAt: now.Add(time.Hour), RequiredApprovals: 2,
	}
	if err := db.CreateRequest(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	box.Wake()
	wait := func(n int) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for len(h.list()) < n {
			select {
			case <-h.seen:
			case <-deadline:
				t.Fatalf("the receiver got %q, want %d events", h.list(), n)
			}
		}
	}
	review := func(who string) {
		t.Helper()
		if _, err := db.UpdateRequest(t.Context(), r.ID, who, func(r *approval.Request) error {
			return r.Review(approval.Reviewer{ID: who}, approval.VerdictApprove, "", "", time.Now())
		}); err != nil {
			t.Fatal(err)
		}
		box.Wake()
	}
	wait(1)
	review("bob")
	wait(2)
	review("carol")
	wait(3)
	// Nothing more is due: a fourth event would be the settling review.
	if ds, err := db.Deliveries(t.Context(), "", 0, 0); err != nil || len(ds) != 3 {
		t.Errorf("deliveries = %d (%v), want 3", len(ds), err)
	}
	want := []string{"requested by agent-1 (pending)", "reviewed by bob (pending)", "approved by carol (approved)"}
	if got := h.list(); !slices.Equal(got, want) {
		t.Errorf("the receiver got %q, want %q", got, want)
	}
}
