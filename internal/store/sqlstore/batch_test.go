package sqlstore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestGroupedWriteIgnoresCallerCancellation: once the batcher has started a
// caller's function, that caller going away (a cancelled context, a passed
// deadline) does not interrupt its statements. SQLite rolls back the whole
// transaction when a write is interrupted, so an interrupted lease renewal
// used to take the approvals and consumes batched with it down too ("no
// such savepoint: w" under load, an approved call refused at dispatch).
func TestGroupedWriteIgnoresCallerCancellation(t *testing.T) {
	db := openTest(t, backends[0].fresh(t))
	if db.batch == nil {
		t.Fatal("the SQLite store has no batcher")
	}
	ctx, cancel := context.WithCancel(t.Context())
	err := db.inTx(ctx, func(tx *tx) error {
		if _, err := tx.exec(ctx, `CREATE TABLE IF NOT EXISTS grouped_probe (x INTEGER)`); err != nil {
			return err
		}
		cancel() // the caller goes away while its function runs
		_, err := tx.exec(ctx, `INSERT INTO grouped_probe (x) VALUES (1)`)
		return err
	})
	if err != nil {
		t.Fatalf("a grouped write whose caller went away mid-function = %v, want it to run and commit", err)
	}
	var n int
	if err := db.sql.QueryRowContext(t.Context(), `SELECT count(*) FROM grouped_probe`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("rows after the commit = %d, want 1", n)
	}
}

// TestGroupedWritePanicStaysWithItsCaller: a write function that panics
// on the batcher's goroutine used to end the process, and every write
// grouped with it. Its savepoint is rolled back, the panic goes on in its
// caller's goroutine (as with a transaction of its own), and the others'
// writes, and later ones, commit.
func TestGroupedWritePanicStaysWithItsCaller(t *testing.T) {
	db := openTest(t, backends[0].fresh(t))
	if db.batch == nil {
		t.Fatal("the SQLite store has no batcher")
	}
	ctx := t.Context()
	if err := db.inTx(ctx, func(tx *tx) error {
		_, err := tx.exec(ctx, `CREATE TABLE IF NOT EXISTS panic_probe (x INTEGER)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	insert := func(x int) func(*tx) error {
		return func(tx *tx) error {
			_, err := tx.exec(ctx, `INSERT INTO panic_probe (x) VALUES (?)`, x)
			return err
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = db.inTx(ctx, insert(i+1)) })
	}
	recovered := func() (v any) {
		defer func() { v = recover() }()
		_ = db.inTx(ctx, func(tx *tx) error {
			if err := insert(-1)(tx); err != nil {
				return err
			}
			panic("boom in a write")
		})
		return nil
	}()
	wg.Wait()
	p, ok := recovered.(*txPanic)
	if !ok || p.value != "boom in a write" {
		t.Fatalf("the caller's recover() = %#v, want the write's panic as a *txPanic", recovered)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("write %d grouped with a panicking one: %v", i+1, err)
		}
	}
	if err := db.inTx(ctx, insert(100)); err != nil {
		t.Fatalf("a write after the panic: %v (the batcher must go on)", err)
	}
	var n, neg int
	if err := db.sql.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(CASE WHEN x < 0 THEN 1 ELSE 0 END), 0) FROM panic_probe`).Scan(&n, &neg); err != nil {
		t.Fatal(err)
	}
	if n != len(errs)+1 || neg != 0 {
		t.Errorf("rows = %d (of them %d from the panicking write), want %d and 0", n, neg, len(errs)+1)
	}
}

// TestPanickingWriteReleasesItsTransaction: on Postgres a write runs on
// its caller's goroutine; one that panicked used to leave its transaction
// open, holding a connection and its row locks until the caller's context
// ended (for a background context, never). Its transaction is rolled back
// and the panic goes on.
func TestPanickingWriteReleasesItsTransaction(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			// ctx does not end while the test runs: only a rollback frees the
			// connection. (It ends before the store closes, so that a failing
			// run ends instead of waiting on the open transaction.)
			ctx, end := context.WithCancel(context.Background())
			t.Cleanup(end)
			if err := db.inTx(ctx, func(tx *tx) error {
				_, err := tx.exec(ctx, `CREATE TABLE IF NOT EXISTS panic_lock (x INTEGER PRIMARY KEY)`)
				if err == nil {
					_, err = tx.exec(ctx, `INSERT INTO panic_lock (x) VALUES (1)`)
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
			func() {
				defer func() {
					if recover() == nil {
						t.Error("the write's panic did not reach its caller")
					}
				}()
				_ = db.inTx(ctx, func(tx *tx) error {
					if _, err := tx.exec(ctx, `UPDATE panic_lock SET x = 2 WHERE x = 1`); err != nil {
						return err
					}
					panic("boom holding a row lock")
				})
			}()
			if n := db.wsql.Stats().InUse; n != 0 {
				t.Fatalf("%d connections still in use after the panic, want 0 (its transaction left open)", n)
			}
			// The row is neither changed nor locked: the next write takes it.
			wctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			if err := db.inTx(wctx, func(tx *tx) error {
				_, err := tx.exec(wctx, `UPDATE panic_lock SET x = 3 WHERE x = 1`)
				return err
			}); err != nil {
				t.Fatalf("a write of the row after the panic: %v", err)
			}
		})
	}
}

// TestLoneWriteFailsAlone: a write that runs in a group of its own (no
// savepoint) and fails after writing is rolled back whole, its caller gets
// its error as is, and the batcher's next write commits.
func TestLoneWriteFailsAlone(t *testing.T) {
	db := openTest(t, backends[0].fresh(t))
	if db.batch == nil {
		t.Fatal("the SQLite store has no batcher")
	}
	ctx := t.Context()
	if err := db.inTx(ctx, func(tx *tx) error {
		_, err := tx.exec(ctx, `CREATE TABLE IF NOT EXISTS lone_probe (x INTEGER)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused after writing")
	err := db.inTx(ctx, func(tx *tx) error {
		if _, err := tx.exec(ctx, `INSERT INTO lone_probe (x) VALUES (1)`); err != nil {
			return err
		}
		return refused
	})
	if err != refused { //nolint:errorlint // the very error, not wrapped
		t.Fatalf("failed write = %v, want its own error", err)
	}
	if err := db.inTx(ctx, func(tx *tx) error {
		_, err := tx.exec(ctx, `INSERT INTO lone_probe (x) VALUES (2)`)
		return err
	}); err != nil {
		t.Fatalf("the write after: %v", err)
	}
	var n, sum int
	if err := db.sql.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(x), 0) FROM lone_probe`).Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	if n != 1 || sum != 2 {
		t.Errorf("rows = %d with sum %d, want only the second write's (1 row, 2)", n, sum)
	}
}
