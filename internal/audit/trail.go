package audit

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/store"
	"toolgate/internal/telemetry"
)

// Store is what the trail needs of the store (sqlstore.DB implements it).
type Store interface {
	// ChainAudit appends links in one transaction holding the chain's
	// head; see sqlstore.DB.ChainAudit.
	ChainAudit(ctx context.Context, limit, calls int, build func(store.AuditHead, []store.AuditSource) ([]store.AuditEntry, error)) (appended int, more bool, err error)
	// PruneAudit deletes the chain's links older than cutoff and keeps
	// the last one deleted as the anchor.
	PruneAudit(ctx context.Context, cutoff time.Time) (int, error)
}

// Options configures a Trail. Zero fields get the defaults.
type Options struct {
	Logger *slog.Logger
	// Now is the clock of pruning; default time.Now.
	Now func() time.Time
	// QueueSize bounds the calls waiting to be chained (config
	// audit.queue_size, default 4096). A call decided while it is full is
	// not recorded and counts in toolgate_audit_dropped_total. While the
	// store fails, up to as many again that were taken from the queue
	// wait to be retried.
	QueueSize int
	// Batch is the most events and calls one append takes; default 256.
	Batch int
	// Poll is how often the trail looks for new events without being
	// woken (the store's change feed normally wakes it); default 5s.
	Poll time.Duration
	// Settled, when not nil, returns a generation of the store's commits
	// and whether it is current (sqlstore.DB.Settled): Run then skips a
	// Poll's look while the generation is current and unchanged since its
	// last append that succeeded and no call is queued (nothing can be
	// new: every event is a commit).
	Settled store.Settled
	// Linger is how long a decided call may wait in the queue for others
	// to be chained with it (one write transaction for many calls) before
	// the trail appends; a full Batch is appended at once. Default 100ms;
	// the queue is in memory either way, so lingering loses nothing a
	// crash would not.
	Linger time.Duration
	// Retention, when positive, prunes links older than it, hourly,
	// keeping the chain verifiable through its anchor (config
	// audit.retention; default 0: keep every link).
	Retention time.Duration
	// Redaction shapes the display copy of recorded calls' arguments;
	// nil means approval.DefaultRedaction().
	Redaction *approval.Redaction
	Metrics   *telemetry.AuditMetrics
}

// A Trail keeps the audit chain: it queues the calls the gate decided
// without an approval request (gate.Recorder; the call's path never waits
// for the database) and appends them, with the store's events as they
// commit, to the hash chain. Every instance runs one; appends from several
// instances are serialized by the store (one chainer at a time).
type Trail struct {
	s       Store
	log     *slog.Logger
	now     func() time.Time
	opts    Options
	redact  approval.Redaction
	metrics *telemetry.AuditMetrics
	queue   chan gate.Decided
	wake    chan struct{}
	calls   chan struct{} // a call was queued (see Options.Linger)
	// armed is set by the first call queued since the last take from the
	// queue: only that call (and one that fills a Batch) signals calls, so
	// Run is woken once per linger, not once per call.
	armed atomic.Bool

	mu      sync.Mutex     // serializes appends from this instance (Run, Flush)
	pending []gate.Decided // guarded by mu: taken from the queue, not yet chained
	// recs is link's list of the records of a batch, kept from one batch
	// to the next and cleared after each (no record kept alive): made anew
	// per batch it was ≈ 1.6 KB of garbage per approval on Postgres
	// (docs/performance.md, "pglease45"). Guarded by mu.
	recs []Record
	// callRecs is Flush's list of a batch's call records, kept from one
	// batch to the next and cleared after each, as recs is: made anew per
	// batch it was a Record (≈ 400 bytes) of garbage per call at one call
	// per batch (issue 13, alloc49). Guarded by mu.
	callRecs []Record
}

var _ gate.Recorder = (*Trail)(nil)

// New returns a Trail over s.
func New(s Store, opts *Options) *Trail {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 4096
	}
	if o.Batch <= 0 {
		o.Batch = 256
	}
	if o.Poll <= 0 {
		o.Poll = 5 * time.Second
	}
	if o.Linger <= 0 {
		o.Linger = 100 * time.Millisecond
	}
	rd := approval.DefaultRedaction()
	if o.Redaction != nil {
		rd = *o.Redaction
	}
	return &Trail{s: s, log: o.Logger, now: o.Now, opts: o, redact: rd, metrics: o.Metrics,
		queue: make(chan gate.Decided, o.QueueSize), wake: make(chan struct{}, 1), calls: make(chan struct{}, 1)}
}

// Decided queues d for the chain without waiting; when the queue is full d
// is dropped and counted (toolgate_audit_dropped_total). It wakes Run only
// for the first call queued since Run last took the queue (which starts
// the linger) and for a call that fills a Batch: the calls in between wait
// for the same append without a wake-up of their own.
func (t *Trail) Decided(_ context.Context, d gate.Decided) {
	select {
	case t.queue <- d:
		// A Swap, not a Load: takeQueued's Swap that reads this true
		// sees d queued and takes it; one that came before makes this
		// Swap read false and signal.
		if !t.armed.Swap(true) || len(t.queue) >= t.opts.Batch {
			select {
			case t.calls <- struct{}{}:
			default:
			}
		}
	default:
		t.metrics.Dropped()
	}
}

// Wake tells the trail that events may have been committed (the store's
// change feed calls it).
func (t *Trail) Wake() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// Run appends to the chain whenever woken, every Poll, Linger after a
// call was queued (at once when a Batch is queued), and prunes hourly when
// Retention is set, until ctx ends; then it chains what is queued (with a
// short deadline) and returns nil. A failing store is logged, counted and
// retried; queued calls wait meanwhile.
func (t *Trail) Run(ctx context.Context) error {
	tick := time.NewTicker(t.opts.Poll)
	defer tick.Stop()
	var lastPrune time.Time
	var linger <-chan time.Time   // set while queued calls linger
	var flushed store.SettledMark // the generation at the last append that succeeded
	for {
		select {
		case <-t.calls:
			if len(t.queue) < t.opts.Batch {
				if linger == nil {
					linger = time.After(t.opts.Linger)
				}
				continue
			}
		case <-linger:
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
			if err := t.Flush(fctx); err != nil {
				t.log.Warn("audit: queued calls not chained at shutdown", "err", err)
			}
			cancel()
			return nil
		case <-t.wake:
		case <-tick.C:
			if len(t.queue) == 0 && flushed.Unchanged(t.opts.Settled) {
				// Nothing can be new: every event is a commit, which
				// moves the generation, and a call queued since the
				// last append is in the queue. An idle gateway's trail
				// asks the store nothing (docs/performance.md, branch
				// idle27).
				t.prune(ctx, &lastPrune)
				continue
			}
		}
		linger = nil
		var err error
		flushed.Look(t.opts.Settled, func() bool { err = t.Flush(ctx); return err == nil })
		if err != nil && ctx.Err() == nil {
			t.metrics.ChainFailed()
			t.log.WarnContext(ctx, "audit: appending to the chain failed; will retry", "err", err)
		}
		t.prune(ctx, &lastPrune)
	}
}

// prune prunes the chain when Retention is set and an hour has passed
// since *last.
func (t *Trail) prune(ctx context.Context, last *time.Time) {
	if t.opts.Retention <= 0 || t.now().Sub(*last) < time.Hour {
		return
	}
	*last = t.now()
	if n, err := t.s.PruneAudit(ctx, t.now().Add(-t.opts.Retention)); err != nil {
		t.log.WarnContext(ctx, "audit: pruning failed", "err", err)
	} else if n > 0 {
		t.log.InfoContext(ctx, "audit: pruned links", "links", n)
	}
}

// Flush appends every call queued so far and every event the store's
// change feed shows so far (on Postgres an event shows once the
// transactions on the server that began before it have ended) to the
// chain, and returns when they are chained (or on the first error;
// calls not chained stay queued). Calls queued while it runs are left to
// the next Flush, so a steady stream of calls cannot keep it going.
func (t *Trail) Flush(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.takeQueued()
	for {
		batch := t.pending[:min(len(t.pending), t.opts.Batch)]
		// Sized once: a Record is ≈ 400 bytes, and growing the list by
		// appends copied a batch of 256 calls over and over (≈ 1 KB of
		// garbage per call, issue 13); and kept (t.callRecs), cleared once
		// the batch is chained or failed, so that no record outlives it.
		calls := t.callRecs[:0]
		if cap(calls) < len(batch) {
			calls = make([]Record, 0, len(batch))
		}
		for _, d := range batch {
			calls = append(calls, t.callRecord(d))
		}
		n, more, err := t.s.ChainAudit(ctx, t.opts.Batch, len(calls), func(head store.AuditHead, src []store.AuditSource) ([]store.AuditEntry, error) {
			return link(head, src, calls, &t.recs)
		})
		clear(calls)
		t.callRecs = calls[:0]
		if err != nil {
			return err
		}
		t.metrics.Appended(n)
		t.pending = slices.Delete(t.pending, 0, len(batch))
		if !more && len(t.pending) == 0 {
			return nil
		}
	}
}

// takeQueued moves the calls queued so far into pending (see take). It
// clears armed first, so the next call queued wakes Run again.
func (t *Trail) takeQueued() {
	t.armed.Swap(false) // a Swap: see Decided
	t.take(len(t.queue))
}

// take moves up to n queued calls into pending, keeping pending within
// the queue's size (a store outage keeps them there).
func (t *Trail) take(n int) {
	for ; n > 0 && len(t.pending) < t.opts.QueueSize; n-- {
		select {
		case d := <-t.queue:
			t.pending = append(t.pending, d)
		default:
			return
		}
	}
}

// callRecord describes a call decided by the gate: the arguments' hash
// and display copy, never the arguments.
func (t *Trail) callRecord(d gate.Decided) Record {
	r := Record{At: Time(d.At), Type: TypeAllowed, ApprovalID: string(d.ApprovalID),
		Principal: d.Principal.ID, OnBehalfOf: d.Principal.OnBehalfOf, Tenant: d.Principal.Tenant, SessionID: d.Principal.SessionID,
		Kind: d.Kind, Server: d.Server, Tool: d.Tool, Rule: d.Rule, Policy: d.PolicyRevision, GrantID: d.Grant}
	if r.Kind == "" {
		r.Kind = approval.KindToolCall
	}
	switch {
	case d.ApprovalID != "":
		r.Type = TypeMonitored
	case !d.Allowed:
		r.Type, r.Reason, r.Code = TypeRefused, d.Reason, d.Code
	}
	if d.Monitor.Verdict != "" {
		m := d.Monitor
		r.Monitor = &m
	}
	// One parse of the arguments for the hash, the display copy and its
	// canonical form (a Display error is a Hash error).
	if a, err := approval.HashDisplayCanonical(d.Arguments, t.redact); err == nil {
		r.ArgumentsHash = a.Hash
		r.Arguments, r.DisplayWarnings = a.Display, a.Warnings
		if a.Depth < approval.MaxDepth { // nested in the record, as canonicalPlain checks
			r.argumentsCanonical = a.Canonical
		}
	} else {
		r.DisplayWarnings = []string{"arguments are not valid JSON: " + err.Error()}
	}
	return r
}

// link chains the events src and the calls after head, in time order
// (events first on a tie). It lists the records in *scratch, which it
// grows when short and leaves cleared (length 0, no record referenced),
// so that one list serves every batch of a Trail.
func link(head store.AuditHead, src []store.AuditSource, calls []Record, scratch *[]Record) ([]store.AuditEntry, error) {
	recs := (*scratch)[:0]
	if n := len(src) + len(calls); cap(recs) < n {
		recs = make([]Record, 0, n)
	}
	defer func() {
		clear(recs)
		*scratch = recs[:0]
	}()
	for _, s := range src {
		recs = append(recs, fromEvent(s))
	}
	recs = append(recs, calls...)
	slices.SortStableFunc(recs, func(a, b Record) int { return cmp.Compare(a.At, b.At) })
	out := make([]store.AuditEntry, 0, len(recs))
	prev, seq := head.Hash, head.Seq
	var lh linkHasher
	for _, r := range recs {
		seq++
		r.Seq = seq
		b, err := r.Canonical()
		if err != nil {
			return nil, err
		}
		at, err := time.Parse(time.RFC3339Nano, r.At)
		if err != nil {
			return nil, err
		}
		e := store.AuditEntry{Seq: seq, At: at, Tenant: r.Tenant, Record: b, PrevHash: prev, Hash: lh.hash(prev, b)}
		out = append(out, e)
		prev = e.Hash
	}
	return out, nil
}
