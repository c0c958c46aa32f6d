package gate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"toolgate/internal/approval"
)

// settle turns a decided request into an admission; for an approved request
// it consumes the approval against c first. c is zero when the caller is gone
// (no dispatch can follow).
func (g *Gate) settle(ctx context.Context, c Call, r approval.Request) Admission {
	a := Admission{ApprovalID: r.ID, Meta: g.approvalMeta(r)}
	switch r.State {
	case approval.StateApproved:
		if c.Server == "" {
			a.Message = "approved, but the call is no longer being held"
			return a
		}
		return g.consume(ctx, c, r.ID)
	case approval.StateDenied:
		g.answer(ctx, r.ID)
		a.Message = fmt.Sprintf("denied by %s: %s; nothing was run", r.DecidedBy, orNone(r.Reason))
	case approval.StateExpired:
		a.Timeout = true
		a.Message = fmt.Sprintf("timed out: no decision on approval %s before %s; nothing was run", r.ID, r.ExpiresAt.UTC().Format(time.RFC3339))
		if r.Reason == approval.ReasonUnusedApproval {
			a.Message = fmt.Sprintf("timed out: approval %s was approved but not used within its validity; nothing was run", r.ID)
		}
	case approval.StateCancelled:
		a.Message = cancelledMessage(r)
	case approval.StateInvalidated:
		a.Message = "approval invalidated: " + r.Reason + "; nothing was run"
	case approval.StateConsumed:
		if r.ConsumedWith(c.consumeToken) {
			// c's own consume committed, though whoever ran it saw an error
			// (a decision's joined consume whose COMMIT reply was lost):
			// consume picks it up in a transaction of its own, renewing the
			// dispatch lease, and dispatches it once.
			return g.consume(ctx, c, r.ID)
		}
		a.Message = "approval already used by an identical call; nothing was run. Re-send to request a new approval."
	default:
		a.Message = fmt.Sprintf("approval is %s; nothing was run", r.State)
	}
	return a
}

// answer records that a denial was delivered, so identical re-sends start a
// new request instead of getting it again.
func (g *Gate) answer(ctx context.Context, id approval.ID) {
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err := g.store.UpdateRequest(bg, id, "toolgate", func(r *approval.Request) error { return r.Answer(g.now()) })
	if err != nil && !errors.Is(err, approval.ErrResolved) {
		g.log.WarnContext(ctx, "cannot record that a denial was answered", "approval", id, "err", err)
	}
}

func orNone(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}
