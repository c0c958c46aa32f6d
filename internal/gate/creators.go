package gate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
)

// createdIn reports whether id created one of the sessions of chain (its
// CreatedBy, compared without case as approval.IsRequester compares): the
// host or admin who made the root session holds its token, or handed it
// to an agent, and chose whom it acts for; a child's creator is its
// parent's session principal. Such a person is the requester of the
// session's calls and may not review them (attack51).
func createdIn(chain session.Chain, id string) bool {
	for i := range chain {
		if chain[i].CreatedBy != "" && strings.EqualFold(chain[i].CreatedBy, id) {
			return true
		}
	}
	return false
}

// errNeedChain aborts a review's transaction that found a pending request
// made by a session whose chain it did not read: the review reads it
// (outside the transaction: who created a session never changes) and
// runs again (creatorReview).
var errNeedChain = errors.New("gate: the review needs the requesting session's chain")

// A creatorReview refuses the review of a session's request by someone
// who created a session of its chain (createdIn). Its check runs inside
// the review's transaction; a transaction that has not read the chain
// aborts with errNeedChain, and run reads it and runs the write again:
// only the review of a pending session request pays for that.
type creatorReview struct {
	g        *Gate
	reviewer string
	of       string        // the session principal chain was read for
	chain    session.Chain // of's chain, read by run
}

// check returns an error wrapping approval.ErrSelfReview when reviewer
// created a session of the chain of r's requester, a pending session
// request (read: the chain the transaction read, else nil); errNeedChain
// when that chain is not known yet; else nil.
func (cr *creatorReview) check(r *approval.Request, read session.Chain) error {
	if r.State != approval.StatePending || !strings.HasPrefix(r.RequestedBy, session.PrincipalID("")) {
		return nil // Review answers why it may not be reviewed, or it is no session's
	}
	chain := read
	if chain == nil {
		if cr.of != r.RequestedBy {
			cr.of = r.RequestedBy
			return errNeedChain
		}
		chain = cr.chain
	}
	if createdIn(chain, cr.reviewer) {
		return fmt.Errorf("%w: %s created the session that made the request", approval.ErrSelfReview, cr.reviewer)
	}
	return nil
}

// run runs write, the review's transaction (which calls check), and,
// when it aborted with errNeedChain, reads the chain and runs it again,
// once. Errors: write's, or the store's reading the chain.
func (cr *creatorReview) run(ctx context.Context, write func() error) error {
	err := write()
	if !errors.Is(err, errNeedChain) {
		return err
	}
	id := strings.TrimPrefix(cr.of, session.PrincipalID(""))
	chain, err := cr.g.store.Chain(ctx, session.ID(id))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("read the chain of session %s: %w", id, err)
	}
	cr.chain = chain // nil when no session has that principal: no creator
	return write()
}
