package gate

import (
	"context"
	"sync/atomic"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/grant"
	"toolgate/internal/session"
	"toolgate/internal/store"
)

// sweepDue is when Run's sweeper next has work, so that an idle gate does
// not ask the store every SweepInterval (issue 13: the idle process's
// pages). It is used only with Options.Watched and a store that tells its
// next due times (store.DueTimer); otherwise every interval sweeps.
//
// The sweeper reads the due times after each sweep and sleeps through
// the intervals before the earliest one, unless a write happened since
// that read: one of this gate's own (changeNoting) or one another
// process or instance made, which the store's watch reports (Wake,
// WakeAll, Changed). A write that no event reports only puts a time
// later (a lease renewal), so a due time read earlier is early, never
// late; a consumed request still dispatching is swept every interval
// (its lease moves with unevented renewals, and the sweeper's view of
// the store's health, storeHealth, stays as continuous as before while
// there is one).
type sweepDue struct {
	timer   store.DueTimer // nil: sweep every interval
	changed atomic.Bool    // a write since the last read of the due times

	// Owned by Run's goroutine.
	known bool           // the fields below are from a read with no write since
	times store.DueTimes // that read
}

// noteChange records a write the due times may not include.
func (d *sweepDue) noteChange() {
	if !d.changed.Load() {
		d.changed.Store(true)
	}
}

// idle reports whether nothing can be due at now: the due times are
// known, no write happened since they were read, nothing is dispatching
// and the earliest request's time is after now. Whether the ledger needs
// a prune is ledgerDue's.
func (d *sweepDue) idle(now time.Time) bool {
	if d.timer == nil || !d.known || d.changed.Load() || d.times.Dispatching {
		return false
	}
	return d.times.Requests.IsZero() || now.Before(d.times.Requests)
}

// ledgerDue reports whether the ledger may hold a row that expired by now
// (always, without due times).
func (d *sweepDue) ledgerDue(now time.Time) bool {
	if d.timer == nil || !d.known || d.changed.Load() {
		return true
	}
	return !d.times.Ledger.IsZero() && !now.Before(d.times.Ledger)
}

// sweepIfDue sweeps unless nothing can be due (sweepDue; then it only
// counts the pending requests), then reads the
// next due times, one bounded attempt; a failed read leaves them unknown,
// so the next interval sweeps (fail closed: a time not known is a time
// that may have come).
func (g *Gate) sweepIfDue(ctx context.Context) {
	now := g.now()
	d := &g.due
	pruneDue := d.ledgerDue(now) && now.Sub(g.lastPrune) >= ledgerPruneEvery
	if d.idle(now) && !pruneDue {
		// The pending gauge is still read every interval unless the
		// store's watch vouches for it (countUnlessSettled): it is absent
		// through an outage (docs/deploy.md), not the last count kept.
		g.countUnlessSettled(ctx)
		return
	}
	g.counted = store.SettledMark{}
	// Before the sweep's reads: a write from here on is noted again and
	// seen at the next interval.
	d.changed.Store(false)
	g.sweep(ctx)
	if d.timer == nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	t, err := d.timer.NextDue(cctx)
	cancel()
	d.known, d.times = err == nil, t
	if err != nil && ctx.Err() == nil {
		g.log.WarnContext(ctx, "sweep: cannot read the next due time; sweeping every interval", "err", err)
	}
}

// countUnlessSettled counts the pending requests (countPending) unless the
// store's watch vouches that nothing was committed and none of its polls
// failed since the last count that succeeded (Options.Settled: the same
// generation, current both times). Only the idle sweeper calls it, when no
// write was noted and nothing can be due (sweepDue.idle), so the count
// cannot have changed; what the count still adds is the store's health
// (storeHealth, the gauge absent through an outage), which the watch's
// polls, every 250 ms on SQLite, vouch for meanwhile: a failing poll moves
// the generation, and this counts (and reports the failure) at the next
// interval. An idle gateway then asks the store nothing from its sweeper,
// and does not map SQLite's query code back after an idle release
// (docs/performance.md, branch idle27).
func (g *Gate) countUnlessSettled(ctx context.Context) {
	if g.counted.Unchanged(g.opts.Settled) {
		return
	}
	g.counted.Look(g.opts.Settled, func() bool { return g.countPending(ctx) })
}

// changeNoting is the gate's store with every write that may make a
// request or a ledger row due earlier noted in sweepDue (New, with
// Options.Watched): the gate's own writes count without waiting for the
// watch.
type changeNoting struct {
	store.Store
	due *sweepDue
}

func (c changeNoting) CreateRequest(ctx context.Context, r approval.Request, caps ...store.Cap) error {
	defer c.due.noteChange()
	return c.Store.CreateRequest(ctx, r, caps...)
}

func (c changeNoting) UpdateRequest(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	defer c.due.noteChange()
	return c.Store.UpdateRequest(ctx, id, actor, fn)
}

func (c changeNoting) UpdateRequestWithChain(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request, session.Chain) error) (approval.Request, error) {
	defer c.due.noteChange()
	return c.Store.UpdateRequestWithChain(ctx, id, actor, fn)
}

func (c changeNoting) UpdateRequestReading(ctx context.Context, id approval.ID, actor string, reads store.TxReads, fn func(*approval.Request, store.TxRead) error) (approval.Request, error) {
	defer c.due.noteChange()
	return c.Store.UpdateRequestReading(ctx, id, actor, reads, fn)
}

func (c changeNoting) RecordDispatch(ctx context.Context, r store.Result, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	defer c.due.noteChange()
	return c.Store.RecordDispatch(ctx, r, actor, fn)
}

func (c changeNoting) RecordOutcome(ctx context.Context, id approval.ID, o approval.Outcome, rec *store.Result, actor string) error {
	defer c.due.noteChange()
	return c.Store.RecordOutcome(ctx, id, o, rec, actor)
}

func (c changeNoting) PutResult(ctx context.Context, r store.Result) error {
	defer c.due.noteChange()
	return c.Store.PutResult(ctx, r)
}

func (c changeNoting) CreateTask(ctx context.Context, t store.Task) error {
	defer c.due.noteChange()
	return c.Store.CreateTask(ctx, t)
}

func (c changeNoting) SwapTask(ctx context.Context, id approval.ID, from string, fromArgs []byte, to string, toArgs []byte, until time.Time) (bool, error) {
	defer c.due.noteChange()
	return c.Store.SwapTask(ctx, id, from, fromArgs, to, toArgs, until)
}

func (c changeNoting) UseRequestState(ctx context.Context, nonce string, id approval.ID, expiresAt time.Time) error {
	defer c.due.noteChange()
	return c.Store.UseRequestState(ctx, nonce, id, expiresAt)
}

func (c changeNoting) UpdateRequestGranting(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) (*grant.Grant, error)) (approval.Request, *grant.Grant, error) {
	defer c.due.noteChange()
	return c.Store.UpdateRequestGranting(ctx, id, actor, fn)
}

func (c changeNoting) ApplyPolicyApproval(ctx context.Context, id approval.ID, rev store.PolicyRevision, actor string, now time.Time) (store.PolicyRevision, approval.Request, error) {
	defer c.due.noteChange()
	return c.Store.ApplyPolicyApproval(ctx, id, rev, actor, now)
}

func (c changeNoting) RevokeSession(ctx context.Context, id session.ID, actor string, now time.Time) (store.Revocation, error) {
	defer c.due.noteChange()
	return c.Store.RevokeSession(ctx, id, actor, now)
}

func (c changeNoting) CancelDirectTask(ctx context.Context, id approval.ID) (bool, error) {
	defer c.due.noteChange()
	return c.Store.CancelDirectTask(ctx, id)
}

func (c changeNoting) DropTaskArguments(ctx context.Context, id approval.ID) error {
	defer c.due.noteChange()
	return c.Store.DropTaskArguments(ctx, id)
}
