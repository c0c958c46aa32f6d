package gate

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/session"
	"toolgate/internal/store"
)

// consume moves an approved request to consumed in one compare-and-set that
// also revalidates the binding against the bytes about to be sent, the
// current policy (its verdict, and the quorum it requires against the
// approvals that still qualify), and the requesting session (revocation and exclusion,
// read inside the same transaction, so a revocation that answered before
// is always seen); any failure records invalidated with a reason and
// refuses the call. A store that cannot be used right now is retried while
// the caller waits: after an outage, an approved request is either
// dispatched by its holder or ends invalidated with a reason (issue 9,
// defect 13). The consumer then holds a dispatch lease, renewed with the
// others until the outcome is recorded, so a process that dies
// mid-dispatch leaves a visible "unknown" outcome (approval.Request.Sweep).
//
// Every attempt writes the call's consume token with the consume (see
// consumeCheck): an attempt that committed although it answered an error
// (the COMMIT's reply lost with the connection) is recognised by the next
// one, which finds the request consumed with its own token and dispatches
// the call, once, instead of refusing it as already used.
func (g *Gate) consume(ctx context.Context, c Call, id approval.ID) Admission {
	k := g.consumeCheck(c)
	var r approval.Request
	err := g.retryStore(ctx, func(actx context.Context) error {
		var err error
		for moves := 0; ; moves++ {
			r, err = g.consumeOnce(actx, id, k)
			if !errors.Is(err, errRevisionMoved) || moves == maxRevisionMoves {
				return err
			}
			if err := g.catchUpPolicy(actx, k); err != nil {
				return err
			}
		}
	})
	return g.afterConsume(ctx, c, id, r, k, err)
}

// consumeOnce is one transaction of consume: k.apply on id's row, with
// what k needs read inside the transaction (k.reads).
func (g *Gate) consumeOnce(ctx context.Context, id approval.ID, k *consumeCheck) (approval.Request, error) {
	reads := k.reads()
	switch {
	case reads.PolicyRevision:
		return g.store.UpdateRequestReading(ctx, id, "toolgate", reads, k.apply)
	case reads.Chain:
		return g.store.UpdateRequestWithChain(ctx, id, "toolgate", func(r *approval.Request, chain session.Chain) error {
			return k.apply(r, store.TxRead{Chain: chain})
		})
	}
	// A call without a session has no chain to re-check: the check
	// ignores it, so the store need not read it.
	return g.store.UpdateRequest(ctx, id, "toolgate", func(r *approval.Request) error { return k.apply(r, store.TxRead{}) })
}

// A PolicyFollower keeps the policy in force on the newest revision the
// store holds (policy.source: store; policystore.Service is one).
type PolicyFollower interface {
	// Sync reads the store's newest revision and puts it in force when
	// it is newer than the one in force. Errors: the store's, or a
	// revision that does not parse (nothing is put in force).
	Sync(ctx context.Context) error
	// Installed returns the newest revision number put in force (0 for
	// none). It moves after the policy it names is in force.
	Installed() int64
}

// maxRevisionMoves bounds how many times one consume rolls back because
// another revision of the policy committed after its check was made
// (errRevisionMoved): the call is then refused, its approval left approved
// for a re-send. Each move is a revision someone stored meanwhile.
const maxRevisionMoves = 3

// errRevisionMoved rolls back a consume whose check used another policy
// revision than the store's newest, read inside its transaction
// (consumeCheck.apply).
var errRevisionMoved = errors.New("gate: the deployment policy moved since the call was checked")

// A consumeCheck is what the consume of one approved request checks the
// stored row against: the binding of the bytes about to be sent, the
// policy's verdict on them now, and the requesting session (read by the
// store inside the consume's transaction). consumeCheck computes it before
// the transaction, apply runs inside it; the decision's transaction uses
// the same two when it consumes a call held here (Gate.ReviewIf).
type consumeCheck struct {
	g        *Gate
	c        Call
	out      json.RawMessage // the arguments about to be sent
	b        approval.Binding
	deniedBy string // the rule that denies the call now, or why it cannot be evaluated; "" allows
	// need is the approval the policy in force holds the call for, when
	// it does (decided with deniedBy): apply invalidates an approval whose
	// approvals no longer meet its quorum (quorumShort).
	need consumeQuorum
	// rev is the policy revision in force (Options.Policies.Installed)
	// when deniedBy was decided, read before the evaluation: the policy
	// evaluated is that revision's or a newer one. The consume commits
	// only when the store's newest revision, read in its transaction, is
	// rev (apply).
	rev int64
	// token is written with the consume (approval.Request.ConsumeToken):
	// the held call's (Call.consumeToken), else one drawn for this check.
	// A request found consumed with it and no outcome yet is this call's
	// own earlier consume, committed although its writer saw an error.
	token string
}

// newConsumeToken returns a fresh consume token: 128 random bits as 26
// base32 characters (crypto/rand.Text), unique per holder.
func newConsumeToken() string { return rand.Text() }

// consumeCheck hashes the arguments c is about to send (c.Outgoing), reads
// the tool's current digest and asks the policy again (consumeDecision:
// the admit decision when the revision has not moved).
func (g *Gate) consumeCheck(c Call) *consumeCheck {
	out := c.Arguments
	if c.Outgoing != nil {
		out = c.Outgoing()
	}
	hash, err := approval.Hash(out)
	if err != nil {
		hash = "invalid: " + err.Error() // cannot match the approved hash
	}
	k := &consumeCheck{g: g, c: c, out: out, token: c.consumeToken}
	if k.token == "" {
		k.token = newConsumeToken()
	}
	k.decide()
	k.b = approval.Binding{Principal: c.Principal.ID, Server: c.Server, Tool: c.Tool, ArgumentsHash: hash, ToolDigest: g.currentDigest(c)}
	return k
}

// decide sets k.deniedBy from the policy in force now (consumeDecision),
// and k.rev to its revision, read first.
func (k *consumeCheck) decide() {
	if p := k.g.opts.Policies; p != nil {
		k.rev = p.Installed()
	}
	dec, err := k.g.consumeDecision(k.c, k.out)
	k.need = consumeQuorum{}
	switch {
	case err != nil:
		k.deniedBy = "policy evaluation failed"
	case dec.Effect == policy.Deny:
		k.deniedBy = dec.Rule
	case dec.Effect == policy.Approve:
		k.deniedBy = ""
		k.need = consumeQuorum{set: true, rule: dec.Rule, ap: dec.Approval, none: dec.NoEligibleApprovers}
	case dec.Effect == policy.Allow:
		k.deniedBy = ""
	default:
		k.deniedBy = fmt.Sprintf("the policy returned an unknown effect %q", dec.Effect)
	}
}

// catchUpPolicy runs Options.Policies.Sync and decides k again under the
// policy then in force: the store holds a revision (read by a consume's
// transaction) that this instance's follower has not put in force yet.
// Its error is returned (wrapped) for the consume to refuse the call,
// retried while transient: nothing is dispatched under a policy that
// could not be brought up to date.
func (g *Gate) catchUpPolicy(ctx context.Context, k *consumeCheck) error {
	if err := g.opts.Policies.Sync(ctx); err != nil {
		return fmt.Errorf("read the newest policy revision: %w", err)
	}
	k.decide()
	return nil
}

// reads is what the consume's transaction reads for apply: the session
// chain of a call with a session, the newest policy revision with
// Options.Policies.
func (k *consumeCheck) reads() store.TxReads {
	return store.TxReads{Chain: k.c.Principal.SessionID != "", PolicyRevision: k.g.opts.Policies != nil}
}

// apply consumes r, which must be approved (else approval.ErrNotApproved),
// or invalidates it with a reason (approval.Request.ConsumeQuorum: last,
// when the approvals stored on r no longer meet the quorum the policy in
// force requires of the call, quorumShort), inside the
// store's transaction that holds r's row; chain is the requesting
// session's chain read in that transaction (nil for a call without a
// session). A consumed request is then held by this process for its
// dispatch (holdForDispatch), and carries k's token.
//
// A request already consumed with k's token and no outcome
// (approval.Request.ConsumedWith) is this call's own consume, committed by
// an earlier attempt that saw an error: apply accepts it as consumed,
// holding its lease in this transaction (holdForDispatch: so no sweeper
// calls its outcome unknown before the dispatch lease is held), and
// checks nothing again:
// the checks ran in the transaction that consumed it.
//
// With Options.Policies, read.PolicyRevision is the store's newest
// revision, read under the policy lock: when it is not k.rev, apply
// changes nothing and returns errRevisionMoved (the transaction rolls back,
// the caller catches up and checks again).
func (k *consumeCheck) apply(r *approval.Request, read store.TxRead) error {
	if r.ConsumedWith(k.token) {
		k.g.holdForDispatch(r, k.g.now())
		return nil
	}
	if k.g.opts.Policies != nil && read.PolicyRevision != k.rev {
		return fmt.Errorf("%w: revision %d is the newest, the check used %d", errRevisionMoved, read.PolicyRevision, k.rev)
	}
	why := k.deniedBy
	if why == "" && k.c.Principal.SessionID != "" {
		// Sessions: revocation and exclusion are re-checked here; the
		// session's require_approval counts in the quorum (quorumShort)
		// when the policy in force allows the call.
		if read.Chain == nil {
			why = sessionRefusal(nil, store.ErrNotFound, k.c)
		} else {
			why = sessionRefusal(read.Chain, nil, k.c)
		}
	}
	now := k.g.now()
	short := ""
	if why == "" && r.State == approval.StateApproved {
		short = k.quorumShort(r, read)
	}
	if err := r.ConsumeQuorum(k.b, why, short, now); err != nil {
		return err
	}
	if r.State == approval.StateConsumed {
		r.ConsumeToken = k.token
		k.g.holdForDispatch(r, now)
	}
	return nil
}

// holdForDispatch makes this process the holder of r, consumed in the
// transaction being written, for its dispatch: it renews r's lease to
// now+Lease (approval.Request.Renew) unless this process holds r already
// with at least Lease/2 left, which it then keeps. A held call's request
// is renewed every Lease/3 with the others this process holds (its id
// stays in the batch from hold to dispatch: leaseHold, then
// leaseDispatch), so the kept lease is extended before it runs out; and
// on sqlstore a kept lease keeps the request taking its lease from this
// instance's row (leaseMarker), so the next renewal has nothing to write
// on its row. Renewed, the row got a lease of its own that the renewal
// wrote back to the marker, holding the row's lock while it waited for
// the instance row that every decision in flight holds shared: the
// outcome's write waited for that renewal (docs/performance.md,
// "pglease45"). A lease with less than Lease/2 left (renewals failing or
// late) is renewed here as before, so a dispatch starts with at least
// Lease/2 of lease whichever way.
func (g *Gate) holdForDispatch(r *approval.Request, now time.Time) {
	if r.HeldBy == g.instance && r.LeaseUntil.Sub(now) >= g.opts.Lease/2 {
		return
	}
	r.Renew(g.instance, now.Add(g.opts.Lease))
}

// afterConsume turns the consume of id (r as written, or err) into c's
// admission: a consumed request is dispatched (the dispatch lease held,
// the outcome recorded by the admission's finish), an invalidated one or a
// failed write refuses the call.
func (g *Gate) afterConsume(ctx context.Context, c Call, id approval.ID, r approval.Request, k *consumeCheck, err error) Admission {
	if err != nil {
		if errors.Is(err, approval.ErrNotApproved) {
			cur, gerr := g.store.GetRequest(context.WithoutCancel(ctx), id)
			if gerr == nil && cur.State == approval.StateConsumed && cur.ConsumeToken == k.token {
				// This call's own consume committed (its writer saw an
				// error), and before this attempt a sweeper recorded its
				// outcome "unknown" (its lease lapsed during an outage).
				// An outcome is final: nothing dispatches it now.
				g.metrics.DispatchRefused("not_approved")
				g.log.WarnContext(ctx, "approval consumed for this call but its outcome is already recorded; not dispatching", "approval", id, "outcome", cur.DispatchOutcome)
				return Admission{ApprovalID: id, Meta: g.approvalMeta(cur), Message: fmt.Sprintf("refused: the approval was used for this call while the approval store was unreachable, and its outcome was recorded as %s; nothing was run now. Re-send to request a new approval.", cur.DispatchOutcome)}
			}
			if gerr == nil && cur.State != approval.StateApproved {
				g.metrics.DispatchRefused("not_approved")
				return g.settle(ctx, Call{}, cur)
			}
		}
		if errors.Is(err, errRevisionMoved) {
			g.metrics.DispatchRefused("policy_moved")
			g.releaseHold(ctx, id, c.hold)
			g.log.WarnContext(ctx, "the deployment policy kept changing while an approved call was consumed; not dispatching", "approval", id, "err", err)
			return Admission{ApprovalID: id, Message: "refused: the deployment policy kept changing while the approval was being used; nothing was run. Re-send to use the approval under the policy in force."}
		}
		g.metrics.DispatchRefused("store_error")
		g.releaseHold(ctx, id, c.hold)
		in := g.incident(ctx, "cannot consume approval; refusing", err, "approval", id)
		return Admission{ApprovalID: id, Message: fmt.Sprintf("refused: the approval could not be used because the approval store failed; nothing was run (error id %s)", in.ID)}
	}
	g.hub.wake(string(id))
	if r.State != approval.StateConsumed {
		g.metrics.DispatchRefused("invalidated")
		g.log.WarnContext(ctx, "approval invalidated at dispatch", "approval", id, "reason", r.Reason)
		return Admission{ApprovalID: id, Meta: g.approvalMeta(r), Message: "approval invalidated: " + r.Reason + "; nothing was run. Re-send to request a new approval."}
	}
	g.leases.add(id, leaseDispatch)
	g.log.InfoContext(ctx, "approval consumed; dispatching", "approval", id, "server", c.Server, "tool", c.Tool)
	if c.Task {
		g.dropTaskArguments(ctx, id)
	}
	return Admission{Allowed: true, ApprovalID: id, Arguments: k.out, Held: heldCopy(r), finish: func(ctx context.Context, o approval.Outcome, d Recorded) {
		g.finishConsumed(ctx, id, o, d)
	}}
}

// finishConsumed records outcome o and what the dispatch gave (d) of
// request id, which this process consumed (recordOutcome). A panic on
// the way (in the ledger's record or the store's write: a bug) goes on to
// the caller, which answers the call an internal error (the gateway's
// answerPanicked), but first this process lets go of the request's
// dispatch lease: renewing it for as long as the process ran kept the
// request consumed without an outcome, never swept as "unknown"
// (attack13). The outcome is then the sweeper's, once the lease lapses.
func (g *Gate) finishConsumed(ctx context.Context, id approval.ID, o approval.Outcome, d Recorded) {
	returned := false
	defer func() {
		if !returned {
			g.log.ErrorContext(ctx, "panic while recording a dispatch outcome; the approval's dispatch lease is released, its outcome is left to the sweep (unknown)", "approval", id, "outcome", o)
			g.leases.drop(id, leaseDispatch)
		}
	}()
	g.recordOutcome(ctx, id, o, g.ledgerRecord(id, d))
	returned = true
}

// errNoChange aborts an UpdateRequest that has nothing to write.
var errNoChange = errors.New("gate: nothing to change")

// recordOutcome records the dispatch outcome of id and, when rec is not
// nil, its result in the ledger, in one write, so that they land
// together: store.RecordOutcome on the first attempt (on Postgres one
// statement), store.RecordDispatch (UpdateRequest without rec) on later
// ones, which read the row to recognise an earlier attempt's outcome. When the store cannot take it right now, a
// background writer owned by the gate retries it (Run waits for it) while
// the dispatch lease stays renewed, so the sweeper does not call a call
// that ran "unknown" because of an outage: "unknown" is left for a process
// that really died (issue 9, defect 13). The caller is not kept waiting
// for the retries. When the outcome cannot be recorded at all (the
// request was settled otherwise meanwhile), the result is still kept on
// its own, for a re-send naming the approval.
//
// An attempt after the first that finds this very outcome recorded, with
// this very result in the ledger, takes it as its own: an earlier attempt
// committed although it answered an error (its COMMIT's reply lost), and
// there is nothing left to write (ownOutcome).
func (g *Gate) recordOutcome(ctx context.Context, id approval.ID, o approval.Outcome, rec *store.Result) {
	retried := false // attempts run one after the other: the first here, the others in the writer
	write := func(actx context.Context) error {
		again := retried
		retried = true
		if !again {
			// The first attempt: the store checks that the request is
			// consumed without an outcome itself (on Postgres in the
			// statement that writes, one round trip).
			return g.store.RecordOutcome(actx, id, o, rec, "toolgate")
		}
		fn := func(r *approval.Request) error {
			if again && r.State == approval.StateConsumed && r.DispatchOutcome == o {
				return errOwnOutcome
			}
			return r.RecordOutcome(o)
		}
		var err error
		if rec == nil {
			_, err = g.store.UpdateRequest(actx, id, "toolgate", fn)
		} else {
			_, err = g.store.RecordDispatch(actx, *rec, "toolgate", fn)
		}
		if errors.Is(err, errOwnOutcome) {
			return g.ownOutcome(actx, id, o, rec)
		}
		return err
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), attemptTimeout)
	err := write(actx)
	cancel()
	g.health.report(err, g.now())
	if err == nil || !transient(err) {
		g.leases.drop(id, leaseDispatch)
		if err != nil {
			g.log.ErrorContext(ctx, "cannot record dispatch outcome", "approval", id, "outcome", o, "err", err)
			if rec != nil {
				g.recordResult(ctx, *rec)
			}
		}
		return
	}
	started := g.outcomeLater(func() {
		defer g.leases.drop(id, leaseDispatch)
		if err := g.retryStore(g.bg, write); err != nil {
			g.log.ErrorContext(g.bg, "cannot record dispatch outcome", "approval", id, "outcome", o, "err", err)
			if rec != nil {
				g.recordResult(g.bg, *rec)
			}
			return
		}
		g.log.InfoContext(g.bg, "dispatch outcome recorded after retrying", "approval", id, "outcome", o)
	})
	if !started {
		// Run is stopping or done: nothing writes it later. The lease,
		// no longer renewed, lapses, and a live sweeper (another
		// instance's, or this one's next start) records "unknown", as for
		// a writer drainOutcomes stopped.
		g.leases.drop(id, leaseDispatch)
		g.log.ErrorContext(ctx, "stopping: cannot record dispatch outcome; it will be recorded unknown", "approval", id, "outcome", o, "err", err)
		return
	}
	g.log.WarnContext(ctx, "cannot record dispatch outcome yet; retrying in the background", "approval", id, "outcome", o, "err", err)
}

// outcomeLater starts fn, the background writer of an outcome the store
// could not take at once, on g.outcomes, which Run waits for
// (drainOutcomes). It reports false, starting nothing, once Run has begun
// to wait (background.stop).
func (g *Gate) outcomeLater(fn func()) bool {
	return g.outcomes.start(func(wg *sync.WaitGroup) { wg.Go(fn) })
}

// errOwnOutcome aborts a retried outcome write that finds its outcome
// already recorded (recordOutcome).
var errOwnOutcome = errors.New("gate: the outcome is already recorded")

// ownOutcome decides whether outcome o, found recorded on id by a retried
// write, is that write's own earlier attempt: nil when no result goes with
// it (rec nil) or the ledger holds exactly rec's result or error; else an
// error wrapping approval.ErrResolved (someone else recorded it), or the
// store's error reading the ledger.
func (g *Gate) ownOutcome(ctx context.Context, id approval.ID, o approval.Outcome, rec *store.Result) error {
	if rec == nil {
		return nil
	}
	got, err := g.store.GetResult(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%w: outcome %q recorded without this dispatch's result", approval.ErrResolved, o)
	case err != nil:
		return err
	case !bytes.Equal(got.Result, rec.Result) || !bytes.Equal(got.Error, rec.Error) || got.Truncated != rec.Truncated:
		return fmt.Errorf("%w: outcome %q recorded with another result", approval.ErrResolved, o)
	}
	return nil
}
