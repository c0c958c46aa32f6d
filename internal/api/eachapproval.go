package api

import (
	"context"
	"fmt"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// EachApproval is [Server.ListApprovals] that hands fn the approvals c may
// see one at a time, as the store reads them (store.Store.EachRequest),
// instead of collecting the page: what it keeps is one approval, whatever
// the page's arguments weigh (the inbox's page of 100 with 1 MB arguments
// held 100 MB at once; docs/performance.md, branch list28). *a is reused:
// it is valid only during fn's call. fn runs between the store's batched
// reads (no store connection is held meanwhile). next is ListApprovals' cursor; it is "" whenever err is not nil.
// An error of fn ends the read; every error is returned wrapped as
// ListApprovals wraps its own, so [PublicError] answers it the same way.
func (s *Server) EachApproval(ctx context.Context, c Caller, f store.Filter, fn func(a *Approval) error) (next string, err error) {
	if !c.CanRead() {
		return "", forbidden(readRoles)
	}
	f.Tenant = c.Principal.Tenant
	f.Limit = min(f.Limit, maxLimit)
	in := c.inner()
	var a Approval
	next, err = s.approvals.EachRequest(ctx, f, func(r approval.Request) error {
		if !visible(in, r) {
			return nil
		}
		a = fromRequest(r)
		return fn(&a)
	})
	if err != nil {
		return "", fmt.Errorf("list approvals: %w", err)
	}
	return next, nil
}
