package gate

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/session"
	"toolgate/internal/store"
)

// SessionRule is the rule name recorded on approvals that a session's
// require_approval asked for (the deployment policy allowed the call).
const SessionRule = "session require_approval"

// TokenPrefix starts every session token, so a leaked one is recognisable.
const TokenPrefix = "tgs_"

// HashToken returns the lowercase hex SHA-256 of a session token: the only
// form in which tokens are stored.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// serverExists reports whether the deployment configures server; with no
// Options.ServerExists every valid name counts as known.
func (g *Gate) serverExists(server string) bool {
	if g.opts.ServerExists == nil {
		return true
	}
	return g.opts.ServerExists(server)
}

// CreateSession creates a session for actor and returns it with its token,
// which is shown once: only its hash is stored. When actor is itself a
// session (actor.SessionID set) the new session is its child: every
// explicit ref must lie within the parent's effective set (else an error
// wrapping session.ErrWiden whose text names the ref, see
// session.WidenError), every require_approval it states must cover what
// the parent's chain requires of that server (else a
// *session.RequirementWidenError, also wrapping session.ErrWiden), and
// the child's tenant and on_behalf_of are the parent's. Otherwise it is a root session in actor's tenant. Other errors:
// session.ErrBadRef, session.ErrUnknownServer, session.ErrRevoked (the
// parent is revoked), store errors.
func (g *Gate) CreateSession(ctx context.Context, actor approval.Principal, req session.NewSession) (session.Session, string, error) {
	reqs, err := session.NormalizeRequirements(req.RequireApproval, g.serverExists)
	if err != nil {
		return session.Session{}, "", err
	}
	id, err := approval.NewID()
	if err != nil {
		return session.Session{}, "", fmt.Errorf("create session: %w", err)
	}
	token := TokenPrefix + rand.Text() + rand.Text()
	s := session.Session{
		ID:              session.ID(id),
		Principal:       session.PrincipalID(session.ID(id)),
		OnBehalfOf:      req.OnBehalfOf,
		Tenant:          actor.Tenant,
		TokenHash:       HashToken(token),
		RequireApproval: reqs,
		Revision:        1,
		CreatedAt:       g.now().UTC(),
		CreatedBy:       actor.ID,
	}
	if s.OnBehalfOf == "" {
		s.OnBehalfOf = actor.OnBehalfOf
	}
	if actor.SessionID == "" {
		if s.Tools, err = session.NormalizeRefs(req.Tools, g.serverExists); err != nil {
			return session.Session{}, "", err
		}
		s.Mode = session.ModeDefault
		if s.Tools != nil {
			s.Mode = session.ModeExplicit
		}
	} else {
		parent, err := g.store.Chain(ctx, session.ID(actor.SessionID))
		if err != nil {
			return session.Session{}, "", fmt.Errorf("create child of %s: %w", actor.SessionID, err)
		}
		if parent.Revoked() {
			return session.Session{}, "", fmt.Errorf("create child of %s: %w", actor.SessionID, session.ErrRevoked)
		}
		if s.Tools, err = parent.CheckNarrow(req.Tools, g.serverExists); err != nil {
			return session.Session{}, "", err
		}
		// A child may not state a requirement weaker than its parent's (it
		// would be overridden silently by the union): refuse it by name.
		if s.RequireApproval, err = parent.CheckRequirements(req.RequireApproval, g.serverExists); err != nil {
			return session.Session{}, "", err
		}
		s.Mode = parent.ChildMode(s.Tools)
		s.ParentID = parent[0].ID
		s.Tenant, s.OnBehalfOf = parent[0].Tenant, parent[0].OnBehalfOf
	}
	if err := g.store.CreateSession(ctx, s, actor.ID); err != nil {
		return session.Session{}, "", err
	}
	g.log.InfoContext(ctx, "session created", "session", s.ID, "parent", s.ParentID, "mode", s.Mode, "by", actor.ID)
	for _, w := range g.SessionWarnings(s) {
		// Warned, not refused: the call that needs the approval is
		// refused when made (quorumRefusal); the session may never make it.
		g.log.WarnContext(ctx, "session created whose approvals cannot all be reviewed", "session", s.ID, "on_behalf_of", s.OnBehalfOf, "warning", w)
	}
	return store.NormalizeSession(s), token, nil
}

// SessionChain returns the session id and its ancestors (session first),
// or an error wrapping store.ErrNotFound.
func (g *Gate) SessionChain(ctx context.Context, id session.ID) (session.Chain, error) {
	return g.store.Chain(ctx, id)
}

// SetSessionRequirement sets session id's approval requirement for server
// to r (the zero Requirement removes it), if the session's revision is
// ifMatch. It returns the session after the write and whether anything
// changed; an unchanged value writes nothing and records no event. The new
// value applies from the session's next call: calls already evaluated keep
// theirs. On a child session r may not be weaker than what its parent
// chain requires of server (the union would override it without a word,
// as for a new child's): that is a *session.RequirementWidenError
// (wrapping session.ErrWiden). Other errors: session.ErrStaleRevision,
// session.ErrUnknownServer, session.ErrBadRef, session.ErrRevoked,
// store.ErrNotFound.
func (g *Gate) SetSessionRequirement(ctx context.Context, actor approval.Principal, id session.ID, server string, r session.Requirement, ifMatch int64) (session.Session, bool, error) {
	if !session.ValidServerName(server) {
		return session.Session{}, false, fmt.Errorf("%w: server %q", session.ErrBadRef, server)
	}
	if !g.serverExists(server) {
		return session.Session{}, false, fmt.Errorf("%w: %q", session.ErrUnknownServer, server)
	}
	r = session.NormalizeRequirement(r)
	// The parent chain is checked inside the write's transaction, which
	// holds the ancestors' rows: a PUT on the parent cannot commit between
	// the check and the write.
	s, changed, err := g.store.UpdateSessionWithChain(ctx, id, actor.ID, g.now(), func(s *session.Session, ancestors session.Chain) error {
		if len(ancestors) > 0 && !ancestors.Revoked() { // a revoked chain is refused by the update
			if err := ancestors.CheckRequirement(server, r); err != nil {
				return err
			}
		}
		if s.Revision != ifMatch {
			return fmt.Errorf("%w: revision is %d, If-Match %d", session.ErrStaleRevision, s.Revision, ifMatch)
		}
		if r.IsZero() {
			delete(s.RequireApproval, server)
			return nil
		}
		if s.RequireApproval == nil {
			s.RequireApproval = map[string]session.Requirement{}
		}
		s.RequireApproval[server] = r
		return nil
	})
	if err != nil {
		return session.Session{}, false, err
	}
	if changed {
		g.log.InfoContext(ctx, "session policy changed", "session", id, "server", server, "by", actor.ID, "revision", s.Revision)
		g.voidStalePolicyRequests(ctx, s) // they were made against the old revision
	}
	return s, changed, nil
}

// RevokeSession revokes session id and all its descendants at once, cancels
// their pending approvals, invalidates their approved ones not consumed yet
// and wakes the calls held on them (which end cancelled or invalidated):
// once it returned, nothing of the subtree runs. It returns what changed; store.ErrNotFound for an unknown id.
func (g *Gate) RevokeSession(ctx context.Context, actor approval.Principal, id session.ID) (store.Revocation, error) {
	rev, err := g.store.RevokeSession(ctx, id, actor.ID, g.now())
	if err != nil {
		return store.Revocation{}, err
	}
	for _, rid := range slices.Concat(rev.Cancelled, rev.Invalidated) {
		g.hub.wake(string(rid))
	}
	g.log.InfoContext(ctx, "session revoked", "session", id, "by", actor.ID, "sessions", len(rev.Sessions),
		"cancelled", len(rev.Cancelled), "invalidated", len(rev.Invalidated))
	return rev, nil
}

// sessionChain loads the chain of a session principal's call and refuses
// the call when the session is unknown, revoked, or excludes the tool (no
// approval can override that). ok is false with the refusal.
func (g *Gate) sessionChain(ctx context.Context, c Call) (session.Chain, Admission, bool) {
	ch, err := g.store.Chain(ctx, session.ID(c.Principal.SessionID))
	if why := sessionRefusal(ch, err, c); why != "" {
		g.metrics.ToolCall(c.Server, string(policy.Deny))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, g.storeRefusal(ctx, fmt.Sprintf("refused: %s; nothing was run", why), "cannot read the session policy; refusing", err, "session", c.Principal.SessionID), false
		}
		return nil, refuse(fmt.Sprintf("refused: %s; nothing was run", why)), false
	}
	return ch, Admission{}, true
}

// sessionRefusal says why a session's call c may not run, or "" when it
// may. It is checked at admission and again at dispatch.
func sessionRefusal(ch session.Chain, err error, c Call) string {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "unknown session"
	case err != nil:
		return "the session store is unavailable, so the session's policy cannot be checked"
	case ch.Revoked():
		return fmt.Sprintf("session %s was revoked", ch[0].ID)
	case !ch.AllowsItem(c.item()):
		return fmt.Sprintf("%s is outside the session's policy (session %s); no approval can allow it", c.label(), ch[0].ID)
	}
	return ""
}

// sessionApproval is the decision for a call the deployment allows but the
// session requires approval for: the policy's default approval parameters
// (Options.SessionApprovalFunc, else Options.SessionApproval).
func (g *Gate) sessionApproval() policy.Decision {
	ap := g.opts.SessionApproval
	if f := g.opts.SessionApprovalFunc; f != nil {
		ap = f()
	}
	if ap.Timeout <= 0 {
		ap.Timeout = 5 * time.Minute
	}
	if ap.Mode == "" {
		ap.Mode = policy.ModeHold
	}
	if ap.Approvals < 1 {
		ap.Approvals = 1
	}
	return policy.Decision{Effect: policy.Approve, Rule: SessionRule, Matched: []string{SessionRule}, Approval: ap}
}
