package gate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
)

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
		sub := g.subscribeChange(id)
		ok, again := g.foreignLeaseWait(ctx, id, holdBy, &until, sub)
		g.dropChange(sub)
		if !again {
			return ok
		}
	}
}

// foreignLeaseWait is one round of waitForeignLease: it reads request id
// and waits until the lease would end (until, set on the first round),
// holdBy, ctx's end, or a wake-up (sub, made before the read). again is
// true after a wake-up whose cause is not known yet: the next round reads
// the request.
func (g *Gate) foreignLeaseWait(ctx context.Context, id approval.ID, holdBy time.Time, until *time.Time, sub changeSub) (ok, again bool) {
	cur, err := g.store.GetRequest(ctx, id)
	if err == nil {
		g.touch.saw(sub.touched, cur)
	}
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
	case <-sub.woke.C:
	case <-sub.touched.C:
	}
	return false, true
}

// Touched tells the gate that the store was written in a way its change
// feed may not show (on SQLite, any commit of another connection:
// sqlstore.DB.WatchLogTouched): the take-overs waiting for another
// instance's lease are woken when their request's lease moved, so that a
// released lease is taken over at once. It reads the leases of every
// waited request in one batch before it returns (touchWaits), nothing
// when no take-over waits.
func (g *Gate) Touched() { g.touched(g.bg) }

// takenSessionRefusal checks, for holdTaken, the session of c (a
// session principal's call; "" for others) again: a take-over may have
// waited up to a lease for another holder, and a session revoked or
// narrowed meanwhile (the tool now outside its policy) must not hold
// the request (fail closed; the consume would refuse it too, but only
// after a person decided). It returns the refusal, and ok false, when c
// may no longer run, or when the session cannot be read.
func (g *Gate) takenSessionRefusal(ctx context.Context, c Call) (refusal Admission, ok bool) {
	if c.Principal.SessionID == "" {
		return Admission{}, true
	}
	ch, err := g.store.Chain(ctx, session.ID(c.Principal.SessionID))
	why := sessionRefusal(ch, err, c)
	switch {
	case why == "":
		return Admission{}, true
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return g.storeRefusal(ctx, fmt.Sprintf("refused: %s; nothing was run", why), "cannot read the session policy after a take-over; refusing", err, "session", c.Principal.SessionID), false
	}
	g.log.InfoContext(ctx, "identical call refused after its take-over: its session changed while it waited", "session", c.Principal.SessionID)
	return refuse(fmt.Sprintf("refused: %s; nothing was run", why)), false
}

// answerAfterWait answers a call whose MaxHold passed while its
// take-over waited for another holder of r (attach, resume), by r as it
// is now (r as read before the wait when it cannot be read): pending,
// with the approvals it has; approved, saying that another call holds
// the approval, not that it waits for a decision; any other state, ok
// false (the caller answers it by that state: settle, resume's loop).
func (g *Gate) answerAfterWait(ctx context.Context, r approval.Request) (a Admission, cur approval.Request, ok bool) {
	cur, err := g.store.GetRequest(ctx, r.ID)
	if err != nil {
		cur = r
	}
	switch cur.State {
	case approval.StatePending:
		return g.pendingAnswer(cur), cur, true
	case approval.StateApproved:
		return g.heldElsewhereAnswer(cur), cur, true
	}
	return Admission{}, cur, false
}

// heldElsewhereAnswer is pendingAnswer for an approved request r that
// another call holds (its lease had not ended by the call's MaxHold):
// the call waits for no decision, and the approval's validity, not the
// request's expiry, is when it lapses.
func (g *Gate) heldElsewhereAnswer(r approval.Request) Admission {
	valid := "it does not lapse"
	if vu := r.ValidUntil(); !vu.IsZero() {
		valid = "it is valid until " + vu.UTC().Format(time.RFC3339)
	}
	return Admission{
		ApprovalID: r.ID,
		Pending:    true,
		Held:       heldCopy(r),
		Meta:       g.approvalMeta(r),
		Message: fmt.Sprintf("approval %s was approved by %s (rule %q), but another identical call holds it until %s: that call runs it, or lets it go if it went away. "+
			"Nothing was run by this call. Re-send the identical call to continue: it runs once the approval is free (if the other call has run it by then, the re-send needs a new approval); %s.",
			r.ID, r.DecidedBy, r.Rule, r.LeaseUntil.UTC().Format(time.RFC3339), valid),
	}
}

// takenAfterAll reads request id after a take-over's write reported an
// error while its claim's mark was made (takeOver): a lost commit reply
// (a connection that broke after the COMMIT was sent) leaves the request
// leased to this instance, which the take-over then did not hold: the
// re-send made a new request, and the old one stayed leased, held by
// no call, for a whole lease (an identical re-send elsewhere waited it
// out). If the request is open and this instance's lease on it runs, it
// is this take-over's: the mark is this process's only hold on it (the
// claim refuses a second), so whether the write committed or the lease
// was this process's already (its release failed), the call holds it
// and its renewals keep it. Otherwise, or when the read fails, the
// take-over failed (errNoChange, or the read's error).
func (g *Gate) takenAfterAll(ctx context.Context, id approval.ID) (approval.Request, error) {
	cur, err := g.store.GetRequest(ctx, id)
	if err != nil {
		return approval.Request{}, err
	}
	if (cur.State != approval.StatePending && cur.State != approval.StateApproved) || cur.HeldBy != g.instance || cur.LeaseLapsed(g.now()) {
		return approval.Request{}, errNoChange
	}
	g.log.InfoContext(ctx, "a take-over's write reported an error but its lease is stored: taken over", "approval", id)
	return cur, nil
}
