package gate

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// leavesInCreate is the real store, except that a request's creation is
// where the caller goes away: it cancels the caller's context and fails
// with the context's error, as a store call cut off by it does.
type leavesInCreate struct {
	store.Store
	cancel context.CancelFunc
}

func (s *leavesInCreate) CreateRequest(ctx context.Context, _ approval.Request, _ ...store.Cap) error {
	s.cancel()
	<-ctx.Done()
	return ctx.Err()
}

// decidedLog is a Recorder keeping what it was told.
type decidedLog struct {
	mu sync.Mutex
	d  []Decided
}

func (r *decidedLog) Decided(_ context.Context, d Decided) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.d = append(r.d, d)
}

// TestCallerLeftDuringAdmissionIsNoIncident (attack31): a held call
// whose caller goes away while its admission reads or writes the store is
// refused as the caller's leaving, not as a store failure: on 01049d8 each
// was an ERROR "cannot record approval request; denying" with an error id
// and a store-error count, and the audit trail's reason said "the approval
// store is unavailable", for any agent that dropped its held calls at the
// right moment (64 of 300 dropped calls on a live gateway): false
// incidents on demand, and a false reason in the trail.
func TestCallerLeftDuringAdmissionIsNoIncident(t *testing.T) {
	var logs bytes.Buffer
	rec := &decidedLog{}
	ls := &leavesInCreate{Store: sqlitetest.Open(t)}
	pol := &swappable{}
	pol.p.Store(testPolicy(time.Hour))
	g := New(ls, pol, &Options{Recorder: rec, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	ctx, cancel := context.WithCancel(t.Context())
	ls.cancel = cancel
	a := g.Admit(ctx, writeCall("/left"))
	if a.Allowed || strings.Contains(a.Message, "store is unavailable") || !strings.Contains(a.Message, "context canceled") || !strings.Contains(a.Message, "nothing was run") {
		t.Errorf("answer %q (allowed %v), want a refusal naming the caller's leaving", a.Message, a.Allowed)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("the caller's leaving was logged as an error:\n%s", logs.String())
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.d) != 1 || rec.d[0].Allowed || rec.d[0].Reason != a.Message {
		t.Errorf("recorded %+v, want one refusal with the answer's reason", rec.d)
	}
}
