package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// Store is what the outbox needs of the store; *sqlstore.DB has it. Its
// methods must be safe for concurrent use (see sqlstore's FanOut,
// ClaimDeliveries, NextDelivery, FinishDelivery and MessageRef for the
// contract).
type Store interface {
	FanOut(ctx context.Context, limit int, now time.Time, match func(approval.Event, approval.Request) []string, newID func() (string, error)) (store.FanOutResult, error)
	ClaimDeliveries(ctx context.Context, owner string, now, leaseUntil time.Time, limit int) ([]store.Delivery, error)
	RenewDelivery(ctx context.Context, id int64, owner string, leaseUntil time.Time) error
	NextDelivery(ctx context.Context) (time.Time, bool, error)
	FinishDelivery(ctx context.Context, id int64, owner string, res store.DeliveryResult) error
	MessageRef(ctx context.Context, id approval.ID, channel string) (string, error)
	GetRequest(ctx context.Context, id approval.ID) (approval.Request, error)
}

// Metrics records deliveries; *telemetry.DeliveryMetrics has it. A nil
// Metrics records nothing.
type Metrics interface {
	// Delivery counts one outcome on channel: OutcomeDelivered,
	// OutcomeRetried (one failed attempt, to be tried again),
	// OutcomeFailed (given up) or OutcomeSkipped (too old when first seen).
	Delivery(channel, outcome string)
	// Delivered observes the seconds from an event to its delivery.
	Delivered(channel string, seconds float64)
}

// Outcomes counted by [Metrics.Delivery].
const (
	OutcomeDelivered = "delivered"
	OutcomeRetried   = "retried"
	OutcomeFailed    = "failed"
	OutcomeSkipped   = "skipped"
)

// Options configures an Outbox. A nil *Options gives the defaults.
type Options struct {
	// Logger gets a line per failed attempt and per outcome; default
	// discard. Lines name the channel, event and request, never a secret.
	Logger  *slog.Logger
	Metrics Metrics
	// Owner names this instance on the leases it takes; default a random
	// id. Instances sharing a database need distinct owners.
	Owner string
	// Poll is the longest the outbox sleeps without looking for new events
	// and due deliveries when nothing woke it (see Wake); default 1s.
	Poll time.Duration
	// Timeout bounds one attempt; default 10s.
	Timeout time.Duration
	// Lease is how long a claim on a delivery lasts unless renewed;
	// default DefaultLease. The attempting instance renews it every
	// Lease/4 until the attempt's outcome is recorded, so an attempt of
	// any length keeps it, and another instance takes over the delivery
	// of one that died within about Lease (branch revise38; before, a
	// lease lasted 2×Timeout+5s and was never renewed). It must exceed
	// the clock difference between instances.
	Lease time.Duration
	// Backoff is the wait before the second attempt; it doubles with each
	// further failure up to BackoffMax. A wait of d is drawn from
	// [d/2, d). Defaults 1s and 5m.
	Backoff    time.Duration
	BackoffMax time.Duration
	// Parallel caps the attempts under way at once; default 8.
	Parallel int
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Jitter returns a number in [0, 1) for the backoff; default
	// math/rand/v2.Float64.
	Jitter func() float64
}

// An Outbox fans events out into deliveries and attempts them until they
// are delivered or too old; see the package doc. Run it once per process;
// its methods are safe for concurrent use.
type Outbox struct {
	store  Store
	routes []route
	byName map[string]*route
	log    *slog.Logger
	m      Metrics
	o      Options
	wake   chan struct{} // capacity 1: a pending wake-up

	refusedMu sync.Mutex
	refusedAt map[string]time.Time // channel -> when its refusal was last logged at WARN
}

// New returns an Outbox delivering on routes (at least one; names unique).
func New(s Store, routes []Route, opts *Options) (*Outbox, error) {
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
	if o.Jitter == nil {
		o.Jitter = rand.Float64
	}
	if o.Owner == "" {
		id, err := approval.NewID()
		if err != nil {
			return nil, fmt.Errorf("new outbox: %w", err)
		}
		o.Owner = "outbox-" + string(id)
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.BackoffMax < o.Backoff {
		o.BackoffMax = max(o.Backoff, 5*time.Minute)
	}
	if o.Parallel <= 0 {
		o.Parallel = 8
	}
	if len(routes) == 0 {
		return nil, errors.New("new outbox: no channels")
	}
	b := &Outbox{store: s, log: o.Logger, m: o.Metrics, o: o, wake: make(chan struct{}, 1), byName: map[string]*route{}}
	var errs []error
	seen := map[string]bool{}
	for _, r := range routes {
		rt, err := newRoute(r)
		switch {
		case err != nil:
			errs = append(errs, err)
		case seen[r.Name]:
			errs = append(errs, fmt.Errorf("channel %q: name used twice", r.Name))
		default:
			seen[r.Name] = true
			b.routes = append(b.routes, rt)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("new outbox: %w", err)
	}
	names := make([]string, 0, len(b.routes))
	for i := range b.routes {
		b.byName[b.routes[i].Name] = &b.routes[i]
		names = append(names, b.routes[i].Name)
	}
	if z, ok := o.Metrics.(interface{ ZeroChannels(names ...string) }); ok {
		// Every channel's outcomes are exported from the start, at 0, so
		// that an alert on the increase of failed deliveries fires on the
		// first one (a series that appears at 1 shows no increase).
		z.ZeroChannels(names...)
	}
	return b, nil
}

// Wake makes Run look for new events and due deliveries now (the store's
// change feed calls it). It never blocks.
func (b *Outbox) Wake() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// fanOutBatch is how many events one FanOut reads.
const fanOutBatch = 100

// Run fans out and delivers until ctx ends, then waits for the attempts
// under way (each bounded by Timeout) and returns nil. Store errors are
// logged and retried at the next poll; they never end Run.
func (b *Outbox) Run(ctx context.Context) error {
	var (
		wg   sync.WaitGroup
		done = make(chan int64, b.o.Parallel) // the delivery of each finished attempt
		busy = map[int64]bool{}               // the deliveries of the attempts under way
	)
	defer wg.Wait()
	storeFailing := false
	logStore := func(what string, err error) {
		if ctx.Err() != nil || storeFailing {
			return
		}
		storeFailing = true
		b.log.WarnContext(ctx, "notifications: store unavailable; retrying", "op", what, "err", err)
	}
	for {
		failed := false
		for more := true; more && ctx.Err() == nil; {
			var err error
			more, err = b.fanOut(ctx)
			if err != nil {
				logStore("fan out", err)
				failed = true
				break
			}
		}
		claimed := 0
		if free := b.o.Parallel - len(busy); free > 0 && ctx.Err() == nil {
			now := b.o.Now()
			ds, err := b.store.ClaimDeliveries(ctx, b.o.Owner, now, now.Add(b.lease()), free)
			if err != nil {
				logStore("claim", err)
				failed = true
			}
			for _, d := range ds {
				if busy[d.ID] {
					// This instance's own attempt is still under way: its
					// lease lapsed while renewals failed, and the claim
					// renewed it for the same owner. The attempt under way
					// keeps it; a second would send the event twice.
					continue
				}
				busy[d.ID] = true
				claimed++
				wg.Go(func() {
					b.attempt(ctx, d)
					done <- d.ID
				})
			}
		}
		if !failed && storeFailing {
			storeFailing = false
			b.log.InfoContext(ctx, "notifications: store available again")
		}
		wait := b.o.Poll
		if len(busy) < b.o.Parallel && !failed {
			if at, ok, err := b.store.NextDelivery(ctx); err != nil {
				logStore("next delivery", err)
			} else if ok {
				wait = min(wait, max(at.Sub(b.o.Now()), 0))
			}
			if wait == 0 && claimed == 0 {
				// Due but not ours to claim (say, the clocks of two
				// instances differ): do not spin.
				wait = min(b.o.Poll, 100*time.Millisecond)
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-b.wake:
		case id := <-done:
			delete(busy, id)
		case <-t.C:
		}
		t.Stop()
		// Collect every other attempt that ended meanwhile.
		for drained := false; !drained; {
			select {
			case id := <-done:
				delete(busy, id)
			default:
				drained = true
			}
		}
	}
}

// errLeaseLost is the cause of an attempt cancelled because another
// instance took its delivery's lease over (keepLease).
var errLeaseLost = errors.New("the delivery's lease was taken over by another instance")

// DefaultLease is Options.Lease's default: short, since it is renewed
// while an attempt is under way; long enough for a few renewals to fail
// (a store that hiccups) before another instance may take over.
const DefaultLease = 5 * time.Second

// lease is how long a claim lasts without renewal (Options.Lease).
func (b *Outbox) lease() time.Duration { return b.o.Lease }

// keepLease renews this instance's lease on delivery d every Lease/4
// (store.RenewDelivery) until the returned stop is called, which waits for
// the renewer to end. Renewals use their own context, so a shutdown does
// not let the lease lapse before the attempt's outcome is recorded. When
// the lease is lost (another instance claimed the delivery after renewals
// failed for a whole Lease) it stops renewing, logs it and calls lost,
// which cancels the attempt under way: the delivery is the other
// instance's now. An attempt whose request already reached the receiver
// is delivered twice, as the at-least-once contract allows (receivers
// deduplicate by event id).
func (b *Outbox) keepLease(ctx context.Context, d store.Delivery, log *slog.Logger, lost func()) (stop func()) {
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(b.o.Lease / 4)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.o.Lease/4)
			err := b.store.RenewDelivery(rctx, d.ID, b.o.Owner, b.o.Now().Add(b.o.Lease))
			cancel()
			if errors.Is(err, store.ErrConflict) {
				log.WarnContext(ctx, "notification lease lost while attempting it; attempt cancelled, another instance delivers it", "err", err)
				lost()
				return
			}
			if err != nil {
				log.DebugContext(ctx, "renew the notification's lease; trying again", "err", err)
			}
		}
	}()
	return func() {
		close(done)
		<-ended
	}
}

// fanOut turns one batch of new events into deliveries and reports whether
// more may be waiting.
func (b *Outbox) fanOut(ctx context.Context) (bool, error) {
	now := b.o.Now()
	// match may run more than once (a retried transaction): it records
	// the skipped pairs in a set, counted once FanOut succeeded.
	type pair struct {
		seq     int64
		channel string
	}
	skipped := map[pair]bool{}
	match := func(ev approval.Event, r approval.Request) []string {
		var out []string
		for i := range b.routes {
			rt := &b.routes[i]
			if !rt.selects(ev, r) {
				continue
			}
			if !now.Before(ev.At.Add(rt.MaxAge)) {
				skipped[pair{ev.Seq, rt.Name}] = true
				continue
			}
			out = append(out, rt.Name)
		}
		return out
	}
	newID := func() (string, error) {
		id, err := approval.NewID()
		return string(id), err
	}
	res, err := b.store.FanOut(ctx, fanOutBatch, now, match, newID)
	if err != nil {
		return false, err
	}
	for p := range skipped {
		b.count(p.channel, OutcomeSkipped)
		b.log.WarnContext(ctx, "notification not sent: the event is older than the channel's max_age", "channel", p.channel, "seq", p.seq)
	}
	if res.Deliveries > 0 {
		b.log.DebugContext(ctx, "notifications queued", "events", res.Events, "deliveries", res.Deliveries)
	}
	return res.More, nil
}

// attempt delivers d once and records the outcome. The outcome is recorded
// even when ctx ended meanwhile (under its own short timeout), so a
// shutdown does not leave the lease to lapse.
func (b *Outbox) attempt(ctx context.Context, d store.Delivery) {
	rt := b.byName[d.Channel]
	log := b.log.With("channel", d.Channel, "event", d.EventID, "type", d.Event.Type, "approval", d.Event.RequestID, "attempt", d.Attempts)
	// lctx ends the attempt when this instance loses the delivery's lease.
	lctx, loseLease := context.WithCancelCause(ctx)
	defer loseLease(nil)
	defer b.keepLease(ctx, d, log, func() { loseLease(errLeaseLost) })() // until the outcome is recorded
	finish := func(res store.DeliveryResult) {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := b.store.FinishDelivery(fctx, d.ID, b.o.Owner, res); err != nil {
			// The lease lapsed and another instance took over, or the
			// store is down: the lease then lapses and the delivery is
			// attempted again (receivers deduplicate by event id).
			log.WarnContext(ctx, "notification outcome not recorded; it may be delivered again", "err", err)
		}
	}
	if rt == nil {
		// Made by an instance configured with a channel this one lacks:
		// leave it to that one, without counting an attempt's failure.
		finish(store.DeliveryResult{State: store.DeliveryPending, NextAt: b.o.Now().Add(b.o.BackoffMax), Error: "channel not configured on instance " + b.o.Owner})
		log.WarnContext(ctx, "notification for a channel this instance does not have; left for another")
		return
	}
	var (
		ref string
		err error
	)
	r, gerr := b.store.GetRequest(lctx, d.Event.RequestID)
	switch {
	case errors.Is(gerr, store.ErrNotFound):
		err = Permanent(errors.New("the request no longer exists"))
	case gerr != nil:
		err = fmt.Errorf("read the request: %w", gerr)
	default:
		prev, rerr := b.store.MessageRef(lctx, d.Event.RequestID, d.Channel)
		switch {
		case rerr == nil, errors.Is(rerr, store.ErrNotFound):
			actx, cancel := context.WithTimeout(lctx, b.o.Timeout)
			ref, err = rt.Channel.Deliver(actx, Message{EventID: d.EventID, Event: d.Event, Request: r, Channel: d.Channel, Attempt: d.Attempts, Ref: prev})
			cancel()
		default:
			err = fmt.Errorf("read the channel's message: %w", rerr)
		}
	}
	if errors.Is(context.Cause(lctx), errLeaseLost) && err != nil {
		// Another instance holds the delivery now and records its outcome;
		// a finish from here would be refused (store.ErrConflict).
		return
	}
	now := b.o.Now()
	if err == nil {
		finish(store.DeliveryResult{State: store.DeliveryDelivered, At: now, Ref: ref})
		b.count(d.Channel, OutcomeDelivered)
		if b.m != nil {
			b.m.Delivered(d.Channel, now.Sub(d.Event.At).Seconds())
		}
		log.DebugContext(ctx, "notification delivered")
		return
	}
	if ctx.Err() != nil {
		// Shutting down: hand it back as it was, due now, for whoever
		// runs next.
		finish(store.DeliveryResult{State: store.DeliveryPending, NextAt: now, At: now, Error: "interrupted by shutdown", Ref: ref})
		return
	}
	deadline := d.Event.At.Add(rt.MaxAge)
	if IsPermanent(err) || !now.Before(deadline) {
		finish(store.DeliveryResult{State: store.DeliveryFailed, At: now, Error: err.Error(), Ref: ref})
		b.count(d.Channel, OutcomeFailed)
		log.WarnContext(ctx, "notification failed; giving up", "err", err, "max_age", rt.MaxAge)
		return
	}
	next := now.Add(b.backoff(d.Attempts, err))
	if next.After(deadline) {
		next = deadline // one last attempt at max_age
	}
	finish(store.DeliveryResult{State: store.DeliveryPending, NextAt: next, At: now, Error: err.Error(), Ref: ref})
	b.count(d.Channel, OutcomeRetried)
	if IsRefused(err) && b.warnRefused(d.Channel, now) {
		log.WarnContext(ctx, "notification refused by its receiver (check the channel's secret or token); will retry", "err", err, "retry_in", next.Sub(now).Round(time.Millisecond), "next_warning_after", RefusedWarnEvery)
		return
	}
	log.InfoContext(ctx, "notification attempt failed; will retry", "err", err, "retry_in", next.Sub(now).Round(time.Millisecond))
}

// warnRefused reports whether a refusal on channel at now is to be logged
// at WARN: the first one, then once per RefusedWarnEvery.
func (b *Outbox) warnRefused(channel string, now time.Time) bool {
	b.refusedMu.Lock()
	defer b.refusedMu.Unlock()
	if last, ok := b.refusedAt[channel]; ok && now.Sub(last) < RefusedWarnEvery {
		return false
	}
	if b.refusedAt == nil {
		b.refusedAt = make(map[string]time.Time)
	}
	b.refusedAt[channel] = now
	return true
}

// backoff returns the wait after the attempt-th failed attempt: a wait of
// d = Backoff×2^(attempt-1), capped at BackoffMax, drawn from [d/2, d);
// at least what a RetryAfter error asks for.
func (b *Outbox) backoff(attempt int, err error) time.Duration {
	d := b.o.Backoff
	for i := 1; i < attempt && d < b.o.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, b.o.BackoffMax)
	wait := d/2 + time.Duration(b.o.Jitter()*float64(d/2))
	if after, ok := RetryAfterOf(err); ok && after > wait {
		wait = after
	}
	return wait
}

func (b *Outbox) count(channel, outcome string) {
	if b.m != nil {
		b.m.Delivery(channel, outcome)
	}
}
