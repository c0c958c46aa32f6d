package gate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/grant"
	"toolgate/internal/policy"
	"toolgate/internal/store"
)

// DefaultGrantMaxTTL is the longest grant duration when Options.GrantMaxTTL
// is zero (config grants.max_ttl).
const DefaultGrantMaxTTL = 24 * time.Hour

// grantMatcher is the optional part of an Evaluator that says whether a
// grant stands in for an approval the gate itself asks for (a session's
// require_approval); policy.Holder and policy.Evaluator implement it.
type grantMatcher interface {
	MatchGrant(c policy.Call, need policy.Approval) (string, []policy.RuleError)
}

// withGrants gives the caller's grants their chance at a call whose
// decision dec is approve (issue 12: deny > session exclusion > grant >
// approve), hash being the hash of its arguments. It reads the grants usable now for exactly this principal,
// server and tool from the store (every time: nothing is cached, so a
// revocation committed on any instance is seen by the next call), lets
// decide choose one (the policy evaluates the call again with the grants as
// data), and counts the use with the store's conditional update. It
// returns the decision to act on: allow with Decision.Grant set when a
// grant was used; otherwise decide's last decision (the policy may have
// moved meanwhile) or dec. Nothing here allows on an error: a store or
// evaluation error leaves dec (the call is held, or refused if the store
// cannot hold it either). decoded (or nil) is what the admission's
// evaluation decoded of c's arguments: decide's evaluations read them from
// it (policy.Call.Decoded) instead of decoding them again; no decision it
// returns keeps it.
func (g *Gate) withGrants(ctx context.Context, c Call, dec policy.Decision, hash string, decide func(policy.Call) (policy.Decision, error), decoded *policy.Decoded) policy.Decision {
	if c.Kind != "" && c.Kind != approval.KindToolCall {
		return dec // grants remember tool calls only (the policy checks it too)
	}
	if g.grantsDisabled() || !dec.Approval.GrantsAllowed() {
		// Grants are off for this call (config, or the decision's
		// grants: false; the policy checks the latter too): not even read.
		return dec
	}
	now := g.now()
	gs, err := g.store.UsableGrants(ctx, c.Principal.ID, c.Server, c.Tool, now)
	if err != nil {
		g.log.WarnContext(ctx, "cannot read grants; the call needs an approval", "server", c.Server, "tool", c.Tool, "err", err)
		return dec
	}
	if len(gs) == 0 {
		return dec
	}
	pc := g.policyCall(c, c.Arguments)
	pc.Now = now
	pc.Decoded = decoded // the admission's decode of the arguments, if any
	for len(gs) > 0 {
		pc.Grants = policyGrants(gs, g.opts.Reviewers)
		d, err := decide(pc)
		if err != nil {
			return dec
		}
		if d.Decoded != nil {
			pc.Decoded, d.Decoded = d.Decoded, nil
		}
		if d.Grant == "" {
			return d
		}
		used, err := g.store.UseGrant(ctx, d.Grant, grant.Use{At: now, Principal: c.Principal.ID, Session: c.Principal.SessionID, ArgumentsHash: hash})
		switch {
		case err == nil:
			g.log.InfoContext(ctx, "call allowed by a grant instead of an approval", "grant", d.Grant, "use", used.Uses,
				"server", c.Server, "tool", c.Tool, "principal", c.Principal.ID, "rule", d.Rule, "arguments_hash", hash)
			return d
		case errors.Is(err, grant.ErrSpent) || errors.Is(err, store.ErrNotFound):
			// Revoked, expired or used up since it was read: try the others.
			gs = slices.DeleteFunc(gs, func(x grant.Grant) bool { return x.ID == d.Grant })
		default:
			g.log.WarnContext(ctx, "cannot record a grant's use; the call needs an approval", "grant", d.Grant, "err", err)
			return dec
		}
	}
	return dec
}

// sessionGrants is how grants are chosen for a call the deployment policy
// allows and a session requires approval for (sd, with the policy's default
// approval parameters): a grant stands in for that approval too, through
// the policy's MatchGrant. nil (no grants) when the policy cannot match
// grants.
func (g *Gate) sessionGrants(sd policy.Decision) func(policy.Call) (policy.Decision, error) {
	m, ok := g.policy.(grantMatcher)
	if !ok {
		return nil
	}
	return func(pc policy.Call) (policy.Decision, error) {
		d := sd
		if id, _ := m.MatchGrant(pc, sd.Approval); id != "" {
			d.Effect, d.Grant = policy.Allow, id
		}
		return d, nil
	}
}

// policyGrants is what the policy sees of gs. With a roster
// (Options.Reviewers, not nil) a grant's approvers are counted as the
// consume's quorum re-check counts an approval's reviewers
// (qualifyingApprovals): one the roster no longer lists, or lists for
// another tenant than the grant's, is left out, and the others carry the
// groups the roster gives them now, not those recorded when the grant was
// made; so an approver removed or moved out of a group stops standing
// behind their grants as behind their approvals (review51b). Without a
// roster the recorded groups are all there is.
func policyGrants(gs []grant.Grant, roster []Reviewer) []policy.Grant {
	out := make([]policy.Grant, len(gs))
	for i, gr := range gs {
		by := make([]policy.GrantApprover, 0, len(gr.ApprovedBy))
		for _, a := range gr.ApprovedBy {
			groups := a.Groups
			if roster != nil {
				now, ok := rosterGroups(roster, a.ID, gr.Tenant)
				if !ok {
					continue // no longer a reviewer, or not of the grant's tenant
				}
				groups = now
			}
			by = append(by, policy.GrantApprover{ID: a.ID, Groups: groups})
		}
		out[i] = policy.Grant{
			ID: gr.ID, Principal: gr.Principal, Tenant: gr.Tenant, Server: gr.Server, Tool: gr.Tool, When: gr.When,
			ExpiresAt: gr.ExpiresAt, MaxUses: gr.MaxUses, Uses: gr.Uses, Revoked: !gr.RevokedAt.IsZero(), ApprovedBy: by,
		}
	}
	return out
}

// ApproveWithGrant records reviewer's approval of id with grant terms
// attached (see approval.Request.ApproveWithGrant) and, when this review
// settles the approval and enough approvers attached the same terms, makes
// the grant, in the same transaction (store.GrantStore.UpdateRequestGranting).
// It returns the request after the change and the grant it made (nil when
// the approval is still pending or none was made). Errors: those of
// [Gate.Review]; an error wrapping grant.ErrInvalid for terms that cannot
// make a grant (a duration that is not positive or exceeds
// Options.GrantMaxTTL, which is refused and never shortened; a negative
// use cap; a predicate that does not compile); approval.ErrGrantKind for
// an approval that is not of a tool call; grant.ErrNotEndorsed when this
// review settles the approval but fewer approvers than its quorum attached
// these terms (nothing is recorded); grant.ErrForbidden when grants are
// off for the approval (nothing is recorded): Options.GrantsDisabled now,
// or the request's NoGrants (the decision that held it said grants: false,
// or the instance that held it had grants disabled), or, for a request
// held under another policy revision, the policy in force forbids grants
// for calls like it ([Gate.grantsForbiddenNow]).
func (g *Gate) ApproveWithGrant(ctx context.Context, id approval.ID, reviewer approval.Principal, reason, pinnedHash string, terms approval.GrantTerms) (approval.Request, *grant.Grant, error) {
	if g.grantsDisabled() {
		return approval.Request{}, nil, fmt.Errorf("%w: the deployment turns grants off (grants.enabled: false); approve without grant terms", grant.ErrForbidden)
	}
	if err := grant.CheckTerms(terms, g.opts.GrantMaxTTL); err != nil {
		return approval.Request{}, nil, err
	}
	if err := policy.CheckGrantPredicate(terms.When); err != nil {
		return approval.Request{}, nil, fmt.Errorf("%w: when: %w", grant.ErrInvalid, err)
	}
	gid, err := approval.NewID()
	if err != nil {
		return approval.Request{}, nil, fmt.Errorf("grant id: %w", err)
	}
	var (
		r    approval.Request
		made *grant.Grant
	)
	cr := creatorReview{g: g, reviewer: reviewer.ID}
	err = cr.run(ctx, func() error {
		var werr error
		r, made, werr = g.store.UpdateRequestGranting(ctx, id, reviewer.ID, func(r *approval.Request) (*grant.Grant, error) {
			return g.grantingReview(r, &cr, reviewer, reason, pinnedHash, terms, gid)
		})
		return werr
	})
	if errors.Is(err, approval.ErrDuplicate) {
		cur, gerr := g.store.GetRequest(ctx, id)
		if gerr != nil {
			return approval.Request{}, nil, gerr
		}
		return cur, nil, err
	}
	if err != nil {
		return approval.Request{}, nil, err
	}
	g.hub.wake(string(id))
	if r.State == approval.StateApproved {
		g.metrics.ApprovalDecided(string(r.State))
	}
	g.log.InfoContext(ctx, "approval reviewed", "approval", id, "by", reviewer.ID, "verdict", approval.VerdictApprove, "state", r.State, "grant_terms", true)
	if made != nil {
		g.log.InfoContext(ctx, "grant created", "grant", made.ID, "approval", id, "principal", made.Principal,
			"server", made.Server, "tool", made.Tool, "expires_at", made.ExpiresAt, "max_uses", made.MaxUses, "approvals", len(made.ApprovedBy))
	}
	return r, made, nil
}

// GetGrant returns grant id or an error wrapping store.ErrNotFound.
func (g *Gate) GetGrant(ctx context.Context, id string) (grant.Grant, error) {
	return g.store.GetGrant(ctx, id)
}

// ListGrants returns one page of grants.
func (g *Gate) ListGrants(ctx context.Context, f store.GrantFilter) ([]grant.Grant, string, error) {
	return g.store.ListGrants(ctx, f)
}

// GrantUses returns the latest uses of grant id, newest first.
func (g *Gate) GrantUses(ctx context.Context, id string, limit int) ([]grant.Use, error) {
	return g.store.GrantUses(ctx, id, limit)
}

// RevokeGrant revokes grant id for actor. The revocation is committed to
// the store before it returns, and every instance reads grants from the
// store on every call that needs them, so no call admitted after it
// returns uses the grant. Revoking a revoked grant returns it unchanged.
// A principal with a tenant may revoke only its tenant's grants
// (store.ErrNotFound otherwise).
func (g *Gate) RevokeGrant(ctx context.Context, actor approval.Principal, id, reason string) (grant.Grant, error) {
	if actor.Tenant != "" {
		cur, err := g.store.GetGrant(ctx, id)
		if err != nil {
			return grant.Grant{}, err
		}
		if cur.Tenant != actor.Tenant {
			return grant.Grant{}, fmt.Errorf("grant %s: %w", id, store.ErrNotFound)
		}
	}
	gr, changed, err := g.store.RevokeGrant(ctx, id, actor.ID, reason, g.now())
	if err != nil {
		return grant.Grant{}, err
	}
	if changed {
		g.log.InfoContext(ctx, "grant revoked", "grant", id, "by", actor.ID, "uses", gr.Uses)
	}
	return gr, nil
}

// grantsForbidder is the optional part of an Evaluator that says, without
// a call's arguments, whether the policy in force forbids grants for calls
// like it (policy.Holder, policy.Evaluator and *policy.Policy have it).
type grantsForbidder interface {
	GrantsForbidden(c policy.Call, rule string) (bool, string)
}

// grantsForbiddenNow reports whether the policy in force forbids grants
// for request r, and the rule that does: r.NoGrants says what the policy
// said when r was held, with r's arguments; a policy changed since (a
// reload, a governed change) is asked here without them
// (policy.Evaluator.GrantsForbidden, which fails closed on
// argument-dependent rules). When the revision in force is the one that
// held r (and is known), r.NoGrants is the answer and nothing is asked.
// A request held by a session's require_approval is also refused when the
// session approval in force (the policy's approval) says grants: false.
// An Evaluator that cannot answer (neither method) forbids nothing here.
func (g *Gate) grantsForbiddenNow(r approval.Request) (bool, string) {
	if r.Rule == SessionRule && !g.sessionApproval().Approval.GrantsAllowed() {
		return true, SessionRule
	}
	f, ok := g.policy.(grantsForbidder)
	if !ok {
		return false, ""
	}
	if cur := g.PolicyRevision(); cur != "" && cur == r.PolicyRevision {
		return false, ""
	}
	return f.GrantsForbidden(policy.Call{Kind: policy.KindTool, Server: r.Server, Tool: r.Tool,
		Principal: policy.Principal{ID: r.RequestedBy, Tenant: r.Tenant, OnBehalfOf: r.OnBehalfOf}}, r.Rule)
}

// grantsDisabled reports whether the deployment turns grants off now:
// Options.GrantsDisabledFunc when set (serve's, which follows a config
// reload), else Options.GrantsDisabled.
func (g *Gate) grantsDisabled() bool {
	if f := g.opts.GrantsDisabledFunc; f != nil {
		return f()
	}
	return g.opts.GrantsDisabled
}

// forbiddingRule names the rule grantsForbiddenNow returned as a refusal
// says it: `rule "big refunds"`, or the policy's approval for the default
// and a session's require_approval (not a rule named "default").
func forbiddingRule(rule string) string {
	switch rule {
	case policy.DefaultRule:
		return "policy.approval, for calls the policy's default holds"
	case SessionRule:
		return "policy.approval, for calls a session's require_approval holds"
	}
	return fmt.Sprintf("rule %q", rule)
}

// grantingReview is ApproveWithGrant's change of r inside the store's
// transaction: reviewer's approval of r with terms, and the grant gid it
// makes when the approval settles r (nil otherwise). cr refuses the
// creator of r's session (creatorReview; it never read the chain in this
// transaction).
func (g *Gate) grantingReview(r *approval.Request, cr *creatorReview, reviewer approval.Principal, reason, pinnedHash string, terms approval.GrantTerms, gid approval.ID) (*grant.Grant, error) {
	if reviewer.Tenant != "" && r.Tenant != reviewer.Tenant {
		return nil, store.ErrNotFound
	}
	if err := cr.check(r, nil); err != nil {
		return nil, err
	}
	if r.NoGrants {
		return nil, fmt.Errorf("%w: rule %q (or another matching approve rule) says grants: false, or grants.enabled: false where the call was held, so every such call needs its own approval; approve without grant terms", grant.ErrForbidden, r.Rule)
	}
	if no, rule := g.grantsForbiddenNow(*r); no {
		return nil, fmt.Errorf("%w: the policy in force says grants: false (%s) for calls of %s · %s, so every such call needs its own approval; approve without grant terms", grant.ErrForbidden, forbiddingRule(rule), r.Server, r.Tool)
	}
	rv := approval.Reviewer{ID: reviewer.ID, Groups: reviewer.Groups}
	if err := r.ApproveWithGrant(rv, reason, pinnedHash, terms, g.now()); err != nil {
		return nil, err
	}
	gr, ok, err := grant.FromApproval(string(gid), *r)
	if err != nil || !ok {
		return nil, err
	}
	return &gr, nil
}
