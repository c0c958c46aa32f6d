// Package apitest provides an in-memory [api.Approvals] for tests of the
// admin API and its clients. It runs the real approval transitions, so
// reviews behave as they do through the gate, minus persistence.
package apitest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/store"
)

var _ api.Approvals = (*Approvals)(nil)

// Approvals is an in-memory [api.Approvals]. The zero value is not usable;
// call New. Its methods are safe for concurrent use.
type Approvals struct {
	now func() time.Time

	mu sync.Mutex
	// Guarded by mu.
	reqs    map[approval.ID]approval.Request
	filters []store.Filter
	err     error // when set, every method returns it (see SetErr)
}

// New returns an empty Approvals whose reviews happen at now().
func New(now func() time.Time) *Approvals {
	return &Approvals{now: now, reqs: make(map[approval.ID]approval.Request)}
}

// Add stores r, replacing a request with the same id.
func (a *Approvals) Add(r approval.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reqs[r.ID] = r
}

// SetErr makes every method fail with err (nil restores normal service).
func (a *Approvals) SetErr(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.err = err
}

// Filters returns the filters List was called with, in order.
func (a *Approvals) Filters() []store.Filter {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.filters)
}

// Get implements [api.Approvals].
func (a *Approvals) Get(ctx context.Context, id approval.ID) (approval.Request, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return approval.Request{}, a.err
	}
	r, ok := a.reqs[id]
	if !ok {
		return approval.Request{}, fmt.Errorf("get %s: %w", id, store.ErrNotFound)
	}
	return r, nil
}

// List implements [api.Approvals] with the semantics of store.Filter: pages
// in id order, Limit 0 meaning 100, the cursor being the last id returned.
func (a *Approvals) List(ctx context.Context, f store.Filter) ([]approval.Request, string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.filters = append(a.filters, f)
	if a.err != nil {
		return nil, "", a.err
	}
	var out []approval.Request
	for _, r := range a.reqs {
		switch {
		case f.State != "" && r.State != f.State,
			f.State == "" && f.Decided && r.State == approval.StatePending,
			f.RequestedBy != "" && r.RequestedBy != f.RequestedBy,
			f.Tenant != "" && r.Tenant != f.Tenant,
			f.Server != "" && r.Server != f.Server,
			f.Tool != "" && r.Tool != f.Tool,
			!f.CreatedFrom.IsZero() && r.CreatedAt.Before(f.CreatedFrom),
			!f.CreatedBefore.IsZero() && !r.CreatedAt.Before(f.CreatedBefore),
			!strings.HasPrefix(string(r.ID), f.IDPrefix),
			!strings.HasSuffix(string(r.ID), f.IDSuffix),
			f.Cursor != "" && !f.Descending && string(r.ID) <= f.Cursor,
			f.Cursor != "" && f.Descending && string(r.ID) >= f.Cursor:
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(x, y approval.Request) int { return cmp.Compare(x.ID, y.ID) })
	if f.Descending {
		slices.Reverse(out)
	}
	limit := cmp.Or(f.Limit, 100)
	if len(out) > limit {
		return out[:limit], string(out[limit-1].ID), nil
	}
	return out, "", nil
}

// EachRequest implements [api.Approvals]: List's page handed to fn one
// request at a time.
func (a *Approvals) EachRequest(ctx context.Context, f store.Filter, fn func(approval.Request) error) (string, error) {
	rs, next, err := a.List(ctx, f)
	if err != nil {
		return "", err
	}
	for _, r := range rs {
		if err := fn(r); err != nil {
			return "", err
		}
	}
	return next, nil
}

// Review implements [api.Approvals] with approval.Request.Review.
func (a *Approvals) Review(ctx context.Context, id approval.ID, reviewer approval.Principal, v approval.Verdict, reason, pinnedHash string) (approval.Request, error) {
	return a.ReviewIf(ctx, id, reviewer, v, reason, pinnedHash, nil)
}

// ReviewIf implements [api.Approvals]: Review after allow.
func (a *Approvals) ReviewIf(ctx context.Context, id approval.ID, reviewer approval.Principal, v approval.Verdict, reason, pinnedHash string, allow func(approval.Request) error) (approval.Request, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return approval.Request{}, a.err
	}
	r, ok := a.reqs[id]
	if !ok {
		return approval.Request{}, fmt.Errorf("review %s: %w", id, store.ErrNotFound)
	}
	if reviewer.Tenant != "" && r.Tenant != reviewer.Tenant {
		return approval.Request{}, fmt.Errorf("review %s: %w", id, store.ErrNotFound)
	}
	if allow != nil {
		if err := allow(r); err != nil {
			return approval.Request{}, err
		}
	}
	cur := r
	r.Reviews = slices.Clone(r.Reviews)
	err := r.Review(approval.Reviewer{ID: reviewer.ID, Groups: reviewer.Groups}, v, reason, pinnedHash, a.now())
	if errors.Is(err, approval.ErrDuplicate) {
		return cur, err
	}
	if err != nil {
		return approval.Request{}, err
	}
	a.reqs[id] = r
	return r, nil
}
