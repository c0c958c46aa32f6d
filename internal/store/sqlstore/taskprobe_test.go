package sqlstore

import (
	"path/filepath"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/pgtest"
)

// TestPostgresDecisionReadsItsTask: a decision whose context carries a
// store.TaskProbe for its request reads whether the request holds a task
// in the pipeline that locks the row: still two turns between the store
// and the server (turnProxy), where the REST API's answer read the task
// in a third (GetTask). The probe is filled only for its own request and
// only when the write committed (SQLite: TestSQLiteDecisionReadsItsTask).
func TestPostgresDecisionReadsItsTask(t *testing.T) {
	p := newTurnProxy(t, pgtest.Fresh(t))
	db := openTest(t, postgresConfig(p.dsn))
	ctx := t.Context()
	for i := 1; i <= 4; i++ {
		if err := db.CreateRequest(ctx, pendingRequest(testID(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CreateTask(ctx, store.Task{RequestID: testID(1), Principal: approval.Principal{ID: "agent-1", Kind: "agent"}, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	approve := func(r *approval.Request) error {
		return r.Review(approval.Reviewer{ID: "bob"}, approval.VerdictApprove, "", "", t0.Add(time.Minute))
	}
	decide := func(id approval.ID, probe *store.TaskProbe, fn func(*approval.Request) error) (turns int, err error) {
		before := p.count()
		_, err = db.UpdateRequest(store.WithTaskProbe(ctx, probe), id, "bob", fn)
		return p.count() - before, err
	}
	// The statements prepared and cached on the pool's connection.
	if _, err := decide(testID(3), &store.TaskProbe{ID: testID(3)}, approve); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id   approval.ID
		task bool
	}{{testID(1), true}, {testID(2), false}} {
		probe := &store.TaskProbe{ID: c.id}
		turns, err := decide(c.id, probe, approve)
		if err != nil {
			t.Fatal(err)
		}
		if turns != 2 {
			t.Errorf("the decision of %s with a task probe took %d turns, want 2", c.id, turns)
		}
		if want := (store.TaskProbe{ID: c.id, Read: true, Task: c.task}); *probe != want {
			t.Errorf("probe after the decision of %s = %+v, want %+v", c.id, *probe, want)
		}
	}
	other := &store.TaskProbe{ID: testID(1)}
	if _, err := decide(testID(4), other, approve); err != nil {
		t.Fatal(err)
	}
	if other.Read {
		t.Errorf("a probe for %s was filled by the write of %s: %+v", testID(1), testID(4), *other)
	}
	// A write that fails (the request is decided already) commits nothing
	// and fills nothing.
	failed := &store.TaskProbe{ID: testID(1)}
	if _, err := decide(testID(1), failed, func(r *approval.Request) error {
		return r.Review(approval.Reviewer{ID: "carol"}, approval.VerdictDeny, "no", "", t0.Add(time.Minute))
	}); err == nil {
		t.Fatal("a second decision of a decided request succeeded")
	}
	if failed.Read {
		t.Errorf("a failed write filled the probe: %+v", *failed)
	}
}

// TestSQLiteDecisionReadsItsTask: on SQLite too a decision whose context
// carries a store.TaskProbe for its request reads whether the request
// holds a task, in the decision's transaction (branch approve40: the
// caller's GetTask on a reader connection cost a query per approval); the
// probe is filled only for its own request and only when the write
// committed.
func TestSQLiteDecisionReadsItsTask(t *testing.T) {
	db := openTest(t, sqliteConfig(filepath.Join(t.TempDir(), "t.db")))
	ctx := t.Context()
	for i := 1; i <= 3; i++ {
		if err := db.CreateRequest(ctx, pendingRequest(testID(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CreateTask(ctx, store.Task{RequestID: testID(1), Principal: approval.Principal{ID: "agent-1", Kind: "agent"}, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	decide := func(id approval.ID, probe *store.TaskProbe, v approval.Verdict) error {
		_, err := db.UpdateRequest(store.WithTaskProbe(ctx, probe), id, "bob", func(r *approval.Request) error {
			return r.Review(approval.Reviewer{ID: "bob"}, v, "no", "", t0.Add(time.Minute))
		})
		return err
	}
	for _, c := range []struct {
		id   approval.ID
		task bool
	}{{testID(1), true}, {testID(2), false}} {
		probe := &store.TaskProbe{ID: c.id}
		if err := decide(c.id, probe, approval.VerdictApprove); err != nil {
			t.Fatal(err)
		}
		if want := (store.TaskProbe{ID: c.id, Read: true, Task: c.task}); *probe != want {
			t.Errorf("probe after the decision of %s = %+v, want %+v", c.id, *probe, want)
		}
	}
	other := &store.TaskProbe{ID: testID(1)}
	if err := decide(testID(3), other, approval.VerdictApprove); err != nil {
		t.Fatal(err)
	}
	if other.Read {
		t.Errorf("a probe for %s was filled by the write of %s: %+v", testID(1), testID(3), *other)
	}
	// A write that fails (the request is decided already) commits nothing
	// and fills nothing.
	failed := &store.TaskProbe{ID: testID(1)}
	if err := decide(testID(1), failed, approval.VerdictDeny); err == nil {
		t.Fatal("a second decision of a decided request succeeded")
	}
	if failed.Read {
		t.Errorf("a failed write filled the probe: %+v", *failed)
	}
}
