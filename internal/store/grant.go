package store

import (
	"context"
	"slices"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/grant"
)

// GrantFilter selects grants for ListGrants. Zero fields do not filter.
type GrantFilter struct {
	Tenant    string
	Principal string
	Server    string
	Tool      string
	// UsableAt, when set, keeps only grants usable at that time: not
	// revoked, not expired, not used up.
	UsableAt time.Time
	// IDPrefix matches ids starting with this text (CLI short ids).
	IDPrefix string
	// IDSuffix matches ids ending with this text (short ids: the end of a
	// UUIDv7 is random, its start is shared by grants made close together).
	IDSuffix string
	// Limit caps the page size; 0 means 100. Cursor is the NextCursor of
	// the previous page ("" for the first): opaque, read by
	// ParseListCursor (a bad one is ErrBadCursor; a grant id, the cursor
	// before list orders, is still one). Pages are in list order
	// (ListPosition: the order in which the store created the grants,
	// whatever their ids' clocks say), oldest first: a reader that
	// follows the cursors to "" sees every matching grant created before
	// it read its last page.
	Limit  int
	Cursor string
}

// GrantStore persists remembered grants (issue 12) and writes their
// events (grant.EventCreated, EventUsed, EventRevoked; subject
// approval.Event.GrantID, state empty) to the same event log as approvals,
// in the transaction of the change. Every backend implements it as part of
// Store. Methods are safe for concurrent use, also by several processes or
// instances sharing one database; times come from the caller and are
// stored in UTC with millisecond precision.
type GrantStore interface {
	// UpdateRequestGranting is UpdateRequest whose fn may also return a
	// grant to create: in the same transaction as the request's change and
	// its events, the grant is inserted (Uses 0, not revoked) with one
	// grant.EventCreated event (actor, at the grant's CreatedAt). So an
	// approval and the grant attached to it are stored together or not at
	// all. fn may run more than once and must return the same grant id
	// each time. ErrAlreadyExists if the grant id is taken or the source
	// approval already has a grant.
	UpdateRequestGranting(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) (*grant.Grant, error)) (approval.Request, *grant.Grant, error)
	// GetGrant returns the grant, or ErrNotFound.
	GetGrant(ctx context.Context, id string) (grant.Grant, error)
	// ListGrants returns one page of grants and the cursor of the next
	// ("" at the end), in list order (see GrantFilter).
	ListGrants(ctx context.Context, f GrantFilter) (gs []grant.Grant, next string, err error)
	// UsableGrants returns the grants of principal for exactly (server,
	// tool) that are usable at now (not revoked, not expired, not used
	// up), oldest first, at most 100. It reads the database every time
	// (no cache), so a revocation committed anywhere is seen by the next
	// call.
	UsableGrants(ctx context.Context, principal, server, tool string, now time.Time) ([]grant.Grant, error)
	// UseGrant counts one use of grant id, atomically: a conditional
	// update that succeeds only while the grant is not revoked, not
	// expired at u.At and below its MaxUses, so MaxUses holds across every
	// instance. In the same transaction it records u (as use number
	// Uses+1, u.N is ignored) and writes one grant.EventUsed event (actor
	// u.Principal, at u.At). It returns the grant after the use; an error
	// wrapping grant.ErrSpent when the grant is no longer usable (nothing
	// is written); ErrNotFound for an unknown id.
	UseGrant(ctx context.Context, id string, u grant.Use) (grant.Grant, error)
	// GrantUses returns the latest uses of grant id, newest first, at most
	// limit (0 means 100).
	GrantUses(ctx context.Context, id string, limit int) ([]grant.Use, error)
	// RevokeGrant revokes grant id at now, by actor, for reason, with one
	// grant.EventRevoked event in the same transaction; once committed, no
	// UseGrant succeeds. A grant already revoked is returned unchanged with
	// changed false (no event). ErrNotFound for an unknown id.
	RevokeGrant(ctx context.Context, id, actor, reason string, now time.Time) (g grant.Grant, changed bool, err error)
}

// NormalizeGrant returns g with its times in UTC truncated to the
// millisecond and its lists copied (nil for empty): what every backend
// returns.
func NormalizeGrant(g grant.Grant) grant.Grant {
	g.CreatedAt = Millis(g.CreatedAt)
	g.ExpiresAt = Millis(g.ExpiresAt)
	g.RevokedAt = Millis(g.RevokedAt)
	if len(g.ApprovedBy) == 0 {
		g.ApprovedBy = nil
	} else {
		by := make([]grant.Approver, len(g.ApprovedBy))
		for i, a := range g.ApprovedBy {
			a.Groups = slices.Clone(a.Groups)
			if len(a.Groups) == 0 {
				a.Groups = nil
			}
			by[i] = a
		}
		g.ApprovedBy = by
	}
	return g
}

// GrantEvent returns the event of type typ about grant id, by actor at at.
// Seq is left for the backend to assign.
func GrantEvent(id string, typ approval.EventType, actor string, at time.Time) approval.Event {
	return approval.Event{GrantID: id, Type: typ, Actor: actor, At: Millis(at)}
}
