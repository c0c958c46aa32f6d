package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/pgtest"
)

// BenchmarkDecisionStatements compares, in paired blocks on one database
// (ABBA, then BAAB; four rounds per b.N), the decision's write as on main
// e3d84af ("base": BEGIN, the row FOR UPDATE, the lease FOR SHARE, the
// task probe, then the guarded UPDATE, the events' INSERT, COMMIT: seven
// statements) against this tree's ("new": BEGIN, one locking read, one
// statement for the UPDATE and the events, COMMIT). Each block creates
// approvalIndexBlock requests held under gw-1's instance lease (not
// counted), then decides each with the task probe (approve and consume)
// and records its outcome, approvalIndexWorkers at a time; the reported
// CPU is this process's and every client backend's of the database (not
// autovacuum's, which runs when it will), per approval, the median over
// the blocks. The base's functions below are copies of e3d84af's
// pgUpdateOnce and pgLock, for this comparison only.
//
//	TOOLGATE_TEST_POSTGRES=… go test -run '^$' -bench DecisionStatements -benchtime 1x ./internal/store/sqlstore/
func BenchmarkDecisionStatements(b *testing.B) {
	cfg := postgresConfig(pgtest.Fresh(b))
	cfg.MaxConns = approvalIndexWorkers
	db := openTest(b, cfg)
	ctx := b.Context()
	pg := db.d.(*postgresDialect)
	backends := func() []int {
		var pids []int
		rows, err := db.sql.QueryContext(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'`)
		if err != nil {
			b.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var pid int
			if err := rows.Scan(&pid); err != nil {
				b.Fatal(err)
			}
			pids = append(pids, pid)
		}
		return pids
	}
	// cpu is this process's CPU and every pid's still running (a backend
	// that ended meanwhile counts 0 at both ends: its pair is dropped).
	cpu := func(pids []int) map[int]time.Duration {
		m := map[int]time.Duration{0: cpuTime(b, 0)}
		for _, pid := range pids {
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
				m[pid] = cpuTime(b, pid) - m[0]
			}
		}
		return m
	}
	spent := func(a, z map[int]time.Duration) time.Duration {
		var d time.Duration
		for pid, v := range z {
			if u, ok := a[pid]; ok {
				d += v - u
			}
		}
		return d
	}
	if _, err := db.sql.ExecContext(ctx, `INSERT INTO instance_leases (instance, lease_until) VALUES ('gw-1', $1)`,
		t0.Add(time.Hour).UnixMilli()); err != nil {
		b.Fatal(err)
	}
	next := 0
	// create makes the block's requests, held by gw-1 under its instance
	// lease (the marker), as the gate's held calls are after a renewal.
	create := func() []approval.ID {
		ids := make([]approval.ID, approvalIndexBlock)
		for i := range ids {
			next++
			r := pendingRequest(testID(next))
			r.Renew("gw-1", t0.Add(time.Hour))
			if err := db.CreateRequest(ctx, r); err != nil {
				b.Fatal(err)
			}
			ids[i] = r.ID
		}
		if _, err := db.sql.ExecContext(ctx, `UPDATE requests SET lease_until = 253402300799999 WHERE state = 'pending'`); err != nil {
			b.Fatal(err)
		}
		return ids
	}
	at := t0.Add(time.Minute)
	fn := func(r *approval.Request) error {
		if err := r.Review(approval.Reviewer{ID: "bob"}, approval.VerdictApprove, "", "", at); err != nil {
			return err
		}
		return r.Consume(r.Binding(), "", at)
	}
	decide := func(kind string, id approval.ID) {
		probe := &store.TaskProbe{ID: id}
		pctx := store.WithTaskProbe(ctx, probe)
		var (
			r   approval.Request
			err error
		)
		if kind == "base" {
			r, err = db.pgUpdateOnceBase(pctx, pg, id, "gw-1", fn, nil)
		} else {
			r, err = db.pgUpdateOnce(pctx, pg, id, "gw-1", fn, nil)
		}
		if err != nil || r.State != approval.StateConsumed || !probe.Read {
			b.Fatalf("%s decision of %s: %s, probe %+v, %v", kind, id, r.State, *probe, err)
		}
		if _, err := db.RecordOutcome(ctx, id, approval.OutcomeOK, nil, "gw-1"); err != nil {
			b.Fatal(err)
		}
	}
	block := func(kind string, ids []approval.ID) {
		var wg sync.WaitGroup
		per := len(ids) / approvalIndexWorkers
		for w := range approvalIndexWorkers {
			wg.Go(func() {
				for _, id := range ids[w*per : (w+1)*per] {
					decide(kind, id)
				}
			})
		}
		wg.Wait()
	}
	block("base", create())
	block("new", create())
	got := map[string][]float64{}
	for b.Loop() {
		for round := range 4 {
			order := []string{"base", "new"}
			if round%2 == 1 {
				slices.Reverse(order)
			}
			for _, s := range append(order, order[1], order[0]) {
				ids := create()
				pids := backends()
				c0 := cpu(pids)
				block(s, ids)
				got[s] = append(got[s], float64(spent(c0, cpu(pids)))/float64(time.Microsecond)/approvalIndexBlock)
			}
		}
	}
	for s, v := range got {
		b.ReportMetric(median(v), s+"-cpu-us/approval")
		b.Logf("%s: cpu µs per approval by block %.0f", s, v)
	}
}

const (
	pgLockRequestBase = `SELECT ` + requestSelect + ` FROM requests WHERE id = $1 FOR UPDATE`
	pgLockLeaseBase   = `SELECT lease_until FROM instance_leases
		WHERE instance = (SELECT held_by FROM requests WHERE id = $1 AND lease_until = 253402300799999) FOR SHARE`
	pgLockTaskBase = `SELECT EXISTS (SELECT 1 FROM approval_tasks WHERE request_id = $1)`
)

func (db *DB) pgUpdateOnceBase(ctx context.Context, pg *postgresDialect, id approval.ID, actor string, fn func(*approval.Request) error, also *statement) (approval.Request, error) {
	probe := store.TaskProbeFor(ctx, id)
	var task *bool
	if probe != nil {
		task = new(bool)
	}
	conn, old, err := pgLockBase(ctx, pg.pool, id, true, task)
	if conn == nil && err != nil && ctx.Err() == nil {
		// The connection broke before anything was written (a restart or
		// failover since it was last used): once more, pinged first.
		conn, old, err = pgLockBase(ctx, pg.pool, id, false, task)
	}
	if err != nil {
		if conn != nil {
			pgRollback(ctx, conn)
		}
		return approval.Request{}, err
	}
	cur, err := old.decode()
	if err == nil {
		err = fn(&cur)
	}
	if err == nil && cur.ID != id {
		err = fmt.Errorf("update changed the request id to %q", cur.ID)
	}
	var p storePlan
	if err == nil {
		p, err = planStore(old, cur, actor, db.now())
	}
	if err != nil || (!p.changed && also == nil) {
		pgRollback(ctx, conn)
		return p.out, err
	}
	var b pgx.Batch
	if p.changed {
		b.Queue(dollarPlaceholders(pgGuardedUpdate(p.update)), p.updateArgs...)
		if len(p.events) > 0 {
			q, args := eventsStatement(pg, p.events)
			b.Queue(dollarPlaceholders(q), args...)
		}
		if q, args := releaseNotice(pg, p); q != "" {
			b.Queue(dollarPlaceholders(q), args...)
		}
	}
	if also != nil {
		b.Queue(dollarPlaceholders(also.q), also.args...)
	}
	b.Queue(`COMMIT`)
	br := conn.SendBatch(ctx, &b)
	err = pgCommitBatch(br, b.Len(), p.changed, old.id)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		pgRollback(ctx, conn)
		return approval.Request{}, err
	}
	conn.Release()
	if probe != nil {
		probe.Read, probe.Task = true, *task
	}
	return p.out, nil
}

// pgLock acquires a connection of pool (without its ping when noPing),
// begins a transaction and reads and locks the row of id in one pipeline
// (pgLockRequestBase, pgLockLease). It returns the connection, inside the
// transaction, with the row, or an error (store.ErrNotFound for a missing
// row) and the connection to roll back, or nil when it broke (then the
// pool destroyed it) or could not be acquired. When task is not nil the
// pipeline also reads whether the request holds a task (pgLockTask) into
// *task.
func pgLockBase(ctx context.Context, pool *pgxpool.Pool, id approval.ID, noPing bool, task *bool) (*pgxpool.Conn, requestRow, error) {
	actx := ctx
	if noPing {
		actx = context.WithValue(ctx, skipPing{}, true)
	}
	conn, err := pool.Acquire(actx)
	if err != nil {
		return nil, requestRow{}, err
	}
	var b pgx.Batch
	// At the session's default isolation, not txOnce's READ COMMITTED: its
	// reads lock what they read (under REPEATABLE READ a row changed
	// meanwhile fails with 40001, retried), and under a SERIALIZABLE
	// default a take-over stays visible to an older instance's
	// serializable renewal (docs/performance.md, "attack26").
	b.Queue(`BEGIN`)
	b.Queue(pgLockRequestBase, string(id))
	b.Queue(pgLockLeaseBase, string(id))
	if task != nil {
		b.Queue(pgLockTaskBase, string(id))
	}
	br := conn.SendBatch(ctx, &b)
	var (
		w     requestRow
		lease []int64
	)
	_, err = br.Exec()
	if err == nil {
		err = br.QueryRow().Scan(w.dest()...)
	}
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			lease, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		}
	}
	if err == nil && task != nil {
		err = br.QueryRow().Scan(task)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	switch {
	case conn.Conn().IsClosed():
		conn.Release()
		return nil, requestRow{}, err
	case errors.Is(err, pgx.ErrNoRows):
		return conn, requestRow{}, store.ErrNotFound
	case err != nil:
		return conn, requestRow{}, err
	}
	if w.leaseUntil.Valid && w.leaseUntil.Int64 == leaseMarker {
		// As lockedRequest: the lease read under the share lock, NULL
		// when the instance has no lease row.
		w.holderLease.Valid = len(lease) == 1
		if w.holderLease.Valid {
			w.holderLease.Int64 = lease[0]
		}
	}
	return conn, w, nil
}
