// Package session models agent sessions and their tool policies: which
// tools a session may call and which of them need approval. A child session
// can only ever narrow what its parent may do. The package is pure: no I/O.
package session

import (
	"errors"
	"time"
)

// ID identifies a session (a UUIDv7 string).
type ID string

// Mode is the provenance of a session's tool set.
type Mode string

const (
	// ModeDefault: no tools given and no parent; the session tracks the
	// deployment's exposed tools, including tools upstreams add later.
	ModeDefault Mode = "default"
	// ModeInherited: no tools given, with a parent; the parent's effective
	// set (which keeps tracking the deployment if the parent does).
	ModeInherited Mode = "inherited"
	// ModeExplicit: tools given; an explicit empty list means no tools.
	ModeExplicit Mode = "explicit"
)

// Requirement says which tools of one server need approval: All, or the
// listed tools (deduplicated and sorted). The zero value requires nothing;
// an empty list is the same as false.
type Requirement struct {
	All   bool
	Tools []string
}

// Session is one agent session. Tools and RequireApproval are the
// session's own settings; the effective policy also depends on its
// ancestors (see Chain).
type Session struct {
	ID       ID
	ParentID ID // "" for a root session
	// Principal is the id recorded as requested_by on the session's
	// approvals ("session:<id>"); OnBehalfOf and Tenant are inherited from
	// the creator.
	Principal  string
	OnBehalfOf string
	Tenant     string
	// TokenHash is the lowercase hex SHA-256 of the session token; the
	// token itself is shown once and never stored.
	TokenHash string
	// Mode and Tools: Tools holds refs ("<server>" or "<server>__<tool>"),
	// sorted and deduplicated, and is meaningful only in ModeExplicit.
	Mode  Mode
	Tools []string
	// RequireApproval maps a server name to its requirement.
	RequireApproval map[string]Requirement
	// Revision increases by one on every policy change; writes carry it in
	// If-Match.
	Revision  int64
	CreatedAt time.Time
	CreatedBy string
	RevokedAt time.Time // zero while the session is live
}

// Sentinel errors. Callers branch on them with errors.Is.
var (
	// ErrWiden means a child asked for a tool its parent may not use.
	ErrWiden = errors.New("session: child tools may only narrow the parent session tool policy")
	// ErrUnknownServer means a ref names a server the deployment does not have.
	ErrUnknownServer = errors.New("session: unknown server")
	// ErrBadRef means a ref is not "<server>" or "<server>__<tool>".
	ErrBadRef = errors.New("session: invalid tool ref")
	// ErrRevoked means the session (or an ancestor) was revoked.
	ErrRevoked = errors.New("session: revoked")
	// ErrStaleRevision means an If-Match revision is not the current one.
	ErrStaleRevision = errors.New("session: stale revision")
)

// NewSession is what a caller asks for when creating a session.
type NewSession struct {
	// Tools are refs ("<server>" or "<server>__<tool>"); nil means not
	// given (default or inherited mode), an empty list means no tools.
	Tools []string
	// RequireApproval maps a server to its requirement.
	RequireApproval map[string]Requirement
	// OnBehalfOf names the person a root session acts for; "" takes the
	// creator's. A child always takes its parent's.
	OnBehalfOf string
}
