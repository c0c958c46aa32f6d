package gate

import (
	"context"
	"time"

	"toolgate/internal/approval"
)

// touchedKey is the hub key of the take-over waits (waitForeignLease)
// that a write the store's watch cannot name wakes (Touched). Request
// ids are UUIDs: none is this.
const touchedKey = "\x00touched"

// waitForeignLease waits, for takeOver, until the lease another instance
// holds on request id ends: it is released (that instance's held call
// went away; the watch reports the release: Wake on Postgres, Touched on
// SQLite), or it would lapse by the time read first (at most one Lease
// from now; the fallback when nothing reports the release, as before).
// It reports whether takeOver should try again: false when ctx ended,
// holdBy (the call's MaxHold; zero: none) passed, the request cannot be
// read or is no longer pending or approved. A lease renewed meanwhile
// is not waited for again: by its first end a live holder has renewed
// it, and the take-over's second try finds it held.
func (g *Gate) waitForeignLease(ctx context.Context, id approval.ID, holdBy time.Time) bool {
	var until time.Time // when the lease read first would end
	for {
		// Subscribe before reading: a release between the read and the
		// wait is not lost.
		woke, unsub := g.hub.subscribe(string(id))
		touched, unsubTouched := g.hub.subscribe(touchedKey)
		ok, again := g.foreignLeaseWait(ctx, id, holdBy, &until, woke.C, touched.C)
		unsub()
		unsubTouched()
		if !again {
			return ok
		}
	}
}

// foreignLeaseWait is one round of waitForeignLease: it reads request id
// and waits until the lease would end (until, set on the first round),
// holdBy, ctx's end, or a wake-up (woke, touched). again is true after a
// wake-up whose cause is not known yet: the next round reads the request.
func (g *Gate) foreignLeaseWait(ctx context.Context, id approval.ID, holdBy time.Time, until *time.Time, woke, touched <-chan struct{}) (ok, again bool) {
	cur, err := g.store.GetRequest(ctx, id)
	if err != nil || (cur.State != approval.StatePending && cur.State != approval.StateApproved) {
		return false, false
	}
	now := g.now()
	if cur.HeldBy == g.instance || cur.LeaseLapsed(now) {
		return true, false // this process's own again, or released: look at once
	}
	if until.IsZero() {
		*until = now.Add(min(cur.LeaseUntil.Sub(now), g.opts.Lease) + 10*time.Millisecond)
	}
	end := *until
	if !holdBy.IsZero() && holdBy.Before(end) {
		end = holdBy // the call is answered then (attach)
	}
	t := time.NewTimer(max(end.Sub(now), 0))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, false
	case <-t.C:
		return holdBy.IsZero() || g.now().Before(holdBy), false
	case <-woke:
	case <-touched:
	}
	return false, true
}

// Touched tells the gate that the store was written in a way its change
// feed may not show (on SQLite, any commit of another connection:
// sqlstore.DB.WatchLogTouched): the take-overs waiting for another
// instance's lease read their request again, so that a released lease is
// taken over at once.
func (g *Gate) Touched() { g.hub.wake(touchedKey) }
