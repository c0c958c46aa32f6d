package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// Group commit (SQLite). SQLite writes one transaction at a time and, with
// synchronous=FULL, syncs the WAL to disk at every commit: a few
// milliseconds each, which caps a gateway at a few hundred writes per
// second however fast its queries are. The batcher runs the write
// transactions that are waiting at the same moment as one SQLite
// transaction with one commit (one sync), each inside its own SAVEPOINT:
// a function that fails is rolled back to its savepoint alone, and the
// others commit. Every function still sees the database as if it ran
// alone after the ones before it, and its caller learns its outcome only
// once the commit is on disk. Postgres needs none of this: it commits
// concurrent transactions together by itself.

// maxBatch bounds how many write transactions share one commit.
const maxBatch = 64

// A writeReq is one write transaction waiting for the batcher.
type writeReq struct {
	ctx   context.Context
	fn    func(*tx) error
	done  chan error   // receives the outcome once, buffered
	state atomic.Int32 // reqQueued, reqTaken or reqAbandoned
}

const (
	reqQueued int32 = iota
	reqTaken
	reqAbandoned
)

// errClosed is the outcome of writes still queued when the DB closes.
var errClosed = errors.New("store closed")

// A batcher runs write transactions in groups on the write pool's one
// connection.
type batcher struct {
	db       *DB
	queue    chan *writeReq
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
	// rows is the requests row and its Scan destinations that the
	// groups' locked reads reuse (tx.rows): only loop's goroutine, which
	// runs every group, uses it.
	rows requestScanner
}

func newBatcher(db *DB) *batcher {
	b := &batcher{db: db, queue: make(chan *writeReq), stop: make(chan struct{})}
	b.wg.Go(b.loop)
	return b
}

// close stops the batcher after the group under way; writes waiting get
// errClosed. Closing again does nothing.
func (b *batcher) close() {
	b.stopOnce.Do(func() { close(b.stop) })
	b.wg.Wait()
}

// run runs fn in the next group and returns its outcome. If ctx ends while
// fn is still queued, run returns at once and fn never runs; once fn has
// started, run waits for the commit (fn's writes may be on disk), so the
// caller never mistakes a committed write for a failed one.
func (b *batcher) run(ctx context.Context, fn func(*tx) error) error {
	r := &writeReq{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case b.queue <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-b.stop:
		return errClosed
	}
	var err error
	select {
	case err = <-r.done:
	case <-ctx.Done():
		if r.state.CompareAndSwap(reqQueued, reqAbandoned) {
			return ctx.Err()
		}
		err = <-r.done
	}
	if p := (*txPanic)(nil); errors.As(err, &p) {
		// fn panicked on the batcher's goroutine: the panic goes on in
		// the caller's, as it would with a transaction of its own.
		panic(p)
	}
	return err
}

// A txPanic is the outcome of a write whose function panicked: its
// savepoint is rolled back, the rest of its group commits, and run panics
// with it in the caller's goroutine (a panic on the batcher's goroutine
// would end the process, and the group's other writes with it).
type txPanic struct {
	value any
	stack []byte
}

func (p *txPanic) Error() string {
	return fmt.Sprintf("store write transaction panicked: %v\n%s", p.value, p.stack)
}

// call runs fn on t, turning a panic into a *txPanic.
func call(fn func(*tx) error, t *tx) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &txPanic{value: v, stack: debug.Stack()}
		}
	}()
	return fn(t)
}

func (b *batcher) loop() {
	for {
		var first *writeReq
		select {
		case first = <-b.queue:
		case <-b.stop:
			return
		}
		group := []*writeReq{first}
	more:
		for len(group) < maxBatch {
			select {
			case r := <-b.queue:
				group = append(group, r)
			default:
				break more
			}
		}
		b.commit(group)
	}
}

// commit runs the live requests of group in one transaction, each in a
// savepoint, and delivers every outcome after the commit.
func (b *batcher) commit(group []*writeReq) {
	live := group[:0]
	for _, r := range group {
		if r.state.CompareAndSwap(reqQueued, reqTaken) {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return
	}
	out := make([]error, len(live))
	deliver := func() {
		for i, r := range live {
			r.done <- out[i]
		}
	}
	defer deliver()
	fail := func(err error) {
		for i := range out {
			if out[i] == nil {
				out[i] = err
			}
		}
	}
	// The group's statements must not be interrupted by one caller going
	// away: SQLite rolls back the whole transaction when a write is
	// interrupted. Callers whose function has started wait for the commit,
	// and the functions' own statements ignore their callers' cancellation
	// (tx.grouped): a lease renewal whose deadline passed mid-statement
	// used to roll back the approvals and consumes batched with it.
	bg := context.WithoutCancel(live[0].ctx)
	stx, err := b.db.wsql.BeginTx(bg, nil)
	if err != nil {
		fail(fmt.Errorf("begin: %w", err))
		return
	}
	t := &tx{sql: stx, d: b.db.d, db: b.db, grouped: true, rows: &b.rows}
	if len(live) == 1 {
		// A group of one needs no savepoint: the transaction is its
		// own, and rolling it back is rolling back to the savepoint.
		// The SAVEPOINT and RELEASE were two more statements parsed
		// and run for each such write (branch sqlapprove33).
		if out[0] = call(live[0].fn, t); out[0] != nil {
			_ = stx.Rollback()
			return
		}
		if err := stx.Commit(); err != nil {
			out[0] = fmt.Errorf("commit: %w", err)
		}
		return
	}
	for i, r := range live {
		ctx := context.WithoutCancel(r.ctx)
		if _, err := stx.ExecContext(ctx, `SAVEPOINT w`); err != nil {
			_ = stx.Rollback()
			fail(fmt.Errorf("savepoint: %w", err))
			return
		}
		if err := call(r.fn, t); err != nil {
			out[i] = err
			if _, rerr := stx.ExecContext(ctx, `ROLLBACK TO w`); rerr != nil {
				_ = stx.Rollback()
				fail(fmt.Errorf("rollback to savepoint: %w", rerr))
				return
			}
		}
		if _, err := stx.ExecContext(ctx, `RELEASE w`); err != nil {
			_ = stx.Rollback()
			fail(fmt.Errorf("release savepoint: %w", err))
			return
		}
	}
	if err := stx.Commit(); err != nil {
		fail(fmt.Errorf("commit: %w", err))
	}
}

// A stmtCache keeps prepared statements of one pool by query text, so
// SQLite does not parse the same statement again on every call (a fifth
// of the CPU of a busy gateway before it). It holds at most maxStmts; a
// query past that runs unprepared. pgx caches statements by itself.
type stmtCache struct {
	pool *sql.DB

	mu sync.Mutex
	m  map[string]*sql.Stmt // guarded by mu
}

const maxStmts = 256

func newStmtCache(pool *sql.DB) *stmtCache { return &stmtCache{pool: pool, m: map[string]*sql.Stmt{}} }

// get returns the prepared statement of q, preparing it if needed, or nil
// (run q unprepared) when the cache is full or preparing failed.
func (c *stmtCache) get(ctx context.Context, q string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.m[q]; ok {
		return s
	}
	if len(c.m) >= maxStmts {
		return nil
	}
	s, err := c.pool.PrepareContext(ctx, q)
	if err != nil {
		return nil // the query itself reports the problem
	}
	c.m[q] = s
	return s
}

// close closes every statement.
func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, s := range c.m {
		errs = append(errs, s.Close())
	}
	clear(c.m)
	return errors.Join(errs...)
}
