package gate

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
)

// failingConsume is the real store, except that the update that would
// consume an approval fails with err.
type failingConsume struct {
	store.Store
	err error
}

func (s failingConsume) UpdateRequest(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	cur, err := s.GetRequest(ctx, id)
	if err == nil {
		trial := cur
		if fn(&trial) == nil && trial.State == approval.StateConsumed && cur.State == approval.StateApproved {
			return approval.Request{}, s.err
		}
	}
	return s.Store.UpdateRequest(ctx, id, actor, fn)
}

// UpdateRequestWithChain fails the consume the same way: the gate consumes
// through it (the session is re-checked inside the consume transaction).
func (s failingConsume) UpdateRequestWithChain(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request, session.Chain) error) (approval.Request, error) {
	cur, err := s.GetRequest(ctx, id)
	if err == nil {
		trial := cur
		if fn(&trial, nil) == nil && trial.State == approval.StateConsumed && cur.State == approval.StateApproved {
			return approval.Request{}, s.err
		}
	}
	return s.Store.UpdateRequestWithChain(ctx, id, actor, fn)
}

// syncLog is a concurrency-safe log sink.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var errorIDRE = regexp.MustCompile(`error id ([A-Z2-7]{12})`)

// TestConsumeStoreErrorIsGeneric: when the store fails as an approved call
// is consumed, the agent reads a stable message with an error id, never the
// store's error text; the log has the cause under the same id (issue 9,
// item 11).
func TestConsumeStoreErrorIsGeneric(t *testing.T) {
	const detail = "sqlite: database disk image is malformed (/var/lib/toolgate/secret.db)"
	var logs syncLog
	f := newFixture(t, time.Minute, &Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	f.gate.store = failingConsume{Store: f.db, err: errors.New(detail)}
	offers := signalOffers(f.gate)
	ch := admitAsync(t.Context(), f.gate, writeCall("/a"))
	r := waitPending(t, f.db, 1)[0]
	// The call consumes on its own, after the decision (a decision that
	// consumes in its own transaction fails as a whole instead).
	waitOffered(t, offers, r.ID)
	release := claimOffer(t, f.gate, r.ID)
	_, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", "")
	release()
	if err != nil {
		t.Fatal(err)
	}
	a := recv(t, ch)
	if a.Allowed {
		t.Fatal("allowed although the approval could not be consumed")
	}
	if strings.Contains(a.Message, "malformed") || strings.Contains(a.Message, "/var/lib") {
		t.Errorf("the agent reads the store's error: %q", a.Message)
	}
	m := errorIDRE.FindStringSubmatch(a.Message)
	if m == nil || !strings.Contains(a.Message, "approval store failed; nothing was run") {
		t.Fatalf("message %q, want a generic one with an error id", a.Message)
	}
	if !strings.Contains(logs.String(), "error_id="+m[1]) || !strings.Contains(logs.String(), "malformed") {
		t.Errorf("the log has no line with error_id=%s and the cause:\n%s", m[1], logs.String())
	}
}

// TestStoreDownRefusalHasErrorID: the fail-closed refusals of a store that
// is down carry an error id that the log line with the cause also has.
func TestStoreDownRefusalHasErrorID(t *testing.T) {
	var logs syncLog
	f := newFixture(t, time.Minute, &Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	_ = f.db.Close()
	a := f.gate.Admit(t.Context(), writeCall("/a"))
	m := errorIDRE.FindStringSubmatch(a.Message)
	if a.Allowed || m == nil || !strings.Contains(a.Message, "approval store is unavailable") {
		t.Fatalf("admission %+v, want a refusal with an error id", a)
	}
	if !strings.Contains(logs.String(), "error_id="+m[1]) {
		t.Errorf("no log line with error_id=%s:\n%s", m[1], logs.String())
	}
}

// TestPolicyRequestStoreErrorIsIncident: a store failure behind a session
// policy request is an *Incident (public text with an error id) that still
// unwraps to the store's error, while refusals the session can act on keep
// their text.
func TestPolicyRequestStoreErrorIsIncident(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		f := newFixtureOn(t, db, time.Minute, nil)
		s, _, err := f.gate.CreateSession(t.Context(), approval.Principal{ID: "host", Kind: "human"}, session.NewSession{})
		if err != nil {
			t.Fatal(err)
		}
		actor := approval.Principal{ID: s.Principal, Kind: "agent", SessionID: string(s.ID)}
		_, err = f.gate.RequestSessionPolicy(t.Context(), actor, s.ID, session.Change{})
		if !errors.Is(err, session.ErrEmptyChange) || strings.Contains(err.Error(), "error id") {
			t.Errorf("empty change: %v, want session.ErrEmptyChange as it is", err)
		}
		_ = f.db.Close()
		_, err = f.gate.RequestSessionPolicy(t.Context(), actor, s.ID, session.Change{Tools: &[]string{}})
		var in *Incident
		if !errors.As(err, &in) || !errors.Is(err, store.ErrUnavailable) || err.Error() != "internal error (error id "+in.ID+")" {
			t.Errorf("store down: %v, want an *Incident wrapping store.ErrUnavailable", err)
		}
	})
}
