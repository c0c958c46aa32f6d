// Package policystore keeps the deployment policy in the database
// (policy.source: store, issue 6): it turns proposals into new revisions
// (at once when they only narrow, else through an approval of kind
// policy_change that another admin must approve), applies approved
// proposals exactly once, and makes every instance follow the newest
// revision.
package policystore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/store"
)

// ErrInvalid is wrapped by errors about a proposal that does not parse,
// does not validate, or changes nothing.
var ErrInvalid = errors.New("policystore: invalid proposal")

// ErrTenant is wrapped by the refusal of a proposal by a principal with a
// tenant, and of applying one made by such a principal: the deployment
// policy governs every tenant, so only principals without a tenant
// (deployment admins) change it (issue 9). Tenant-scoped policy is not
// offered.
var ErrTenant = errors.New("policystore: only a principal without a tenant (a deployment admin) may change the deployment policy")

// Target is the approval.Request.Target of every policy_change approval.
const Target = "deployment"

// RuleName is the approval.Request.Rule of every policy_change approval.
const RuleName = "policy_change"

// Defaults of Options.
const (
	DefaultTimeout  = 24 * time.Hour
	DefaultValidFor = time.Hour
	DefaultPoll     = 2 * time.Second
)

// Options configures a Service. The zero value (or nil) is valid.
type Options struct {
	// Logger receives info and warning messages; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Approvers is the approval.Request.Approvers of a policy_change
	// approval: principal ids and "group:<name>" entries, normally every
	// admin. Empty means anyone who may review approvals.
	Approvers []string
	// Timeout is how long a widening proposal stays pending (default 24h);
	// ValidFor how long it stays applicable once approved (default 1h).
	Timeout  time.Duration
	ValidFor time.Duration
	// Poll is how often Follow reads the current revision (default 2 s).
	Poll time.Duration
	// Install is called with each revision that comes in force in this
	// process (by Bootstrap, a local change, or Follow noticing another
	// instance's), in increasing revision order, never twice for one
	// revision. It should swap p into the gate's policy holder.
	Install func(rev store.PolicyRevision, p *policy.Policy)
}

// Service manages the store-backed deployment policy. It is safe for
// concurrent use.
type Service struct {
	store store.Store
	opts  Options
	log   *slog.Logger

	mu        sync.Mutex // serializes install
	installed int64      // newest revision passed to Install

	wake chan struct{} // Wake's signal to Follow; one pending at most
}

// New returns a Service over s.
func New(s store.Store, opts *Options) *Service {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.ValidFor <= 0 {
		o.ValidFor = DefaultValidFor
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	return &Service{store: s, opts: o, log: o.Logger, wake: make(chan struct{}, 1)}
}

// Parse decodes a policy from YAML or JSON text (JSON is YAML), refusing
// unknown keys, a "source" key (where the policy comes from is the
// config file's business) and explicit zeros in rules' approval overrides
// ([policy.ExplicitZeros]), and validates it ([policy.Policy.Validate]).
// Errors wrap ErrInvalid.
func Parse(text []byte) (*policy.Policy, error) {
	dec := yaml.NewDecoder(bytes.NewReader(text))
	dec.KnownFields(true)
	var p policy.Policy
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err == nil { // it decoded above
		if errs := policy.ExplicitZeros(&doc); len(errs) > 0 {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
		}
	}
	if p.Source != "" {
		return nil, fmt.Errorf("%w: source: the policy source is set in the config file, not in a proposal", ErrInvalid)
	}
	if errs := p.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	return &p, nil
}

// Canonical returns p as the canonical YAML text stored in a revision
// (Source left out) and its digest, [policy.Revision].
func Canonical(p *policy.Policy) (text, digest string, err error) {
	c := *p
	c.Source = ""
	b, err := yaml.Marshal(&c)
	if err != nil {
		return "", "", fmt.Errorf("encode policy: %w", err)
	}
	return string(b), policy.Revision(&c), nil
}

// decode parses a stored revision's policy.
func decode(rev store.PolicyRevision) (*policy.Policy, error) {
	p, err := Parse([]byte(rev.Policy))
	if err != nil {
		return nil, fmt.Errorf("policy revision %d: %w", rev.Revision, err)
	}
	return p, nil
}

// Bootstrap puts the store's policy in force at start: when the store has
// no revision, file becomes revision 1 (created by actor); otherwise the
// current revision is in force and file is ignored. It logs which, calls
// Install, and returns the revision in force.
func (s *Service) Bootstrap(ctx context.Context, file *policy.Policy, actor string) (store.PolicyRevision, error) {
	cur, err := s.store.CurrentPolicy(ctx)
	if errors.Is(err, store.ErrNotFound) {
		text, digest, cerr := Canonical(file)
		if cerr != nil {
			return store.PolicyRevision{}, cerr
		}
		cur, err = s.store.AppendPolicy(ctx, 0, store.PolicyRevision{Policy: text, Digest: digest, CreatedAt: s.opts.Now(),
			CreatedBy: actor, Diff: []string{"initial policy from the config file"}}, actor)
		if errors.Is(err, store.ErrConflict) { // another instance bootstrapped first
			cur, err = s.store.CurrentPolicy(ctx)
		} else if err == nil {
			s.log.InfoContext(ctx, "policy store was empty: the config file's policy is revision 1", "digest", cur.Digest)
		}
	}
	if err != nil {
		return store.PolicyRevision{}, fmt.Errorf("bootstrap policy: %w", err)
	}
	if err := s.install(ctx, cur); err != nil {
		return store.PolicyRevision{}, fmt.Errorf("bootstrap policy: %w", err)
	}
	s.log.InfoContext(ctx, "deployment policy from the store", "revision", cur.Revision, "digest", cur.Digest)
	return cur, nil
}

// install decodes rev and calls Install unless a revision as new is in
// force already.
func (s *Service) install(ctx context.Context, rev store.PolicyRevision) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rev.Revision <= s.installed {
		return nil
	}
	p, err := decode(rev)
	if err != nil {
		return err
	}
	if s.opts.Install != nil {
		s.opts.Install(rev, p)
	}
	s.installed = rev.Revision
	s.log.InfoContext(ctx, "deployment policy revision in force", "revision", rev.Revision, "digest", rev.Digest)
	return nil
}

// Installed returns the newest revision this Service put in force (0
// before Bootstrap).
func (s *Service) Installed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.installed
}

// Sync reads the current revision (one indexed read) and puts it in
// force if it is newer than the one in force. Follow calls it, and the
// gate when a consume's transaction found a newer revision than the one
// its check used (gate.Options.Policies), so an approved call is
// re-checked under the newest revision even when this instance's
// follower has not woken yet. Errors: the store's (wrapping
// store.ErrUnavailable when it cannot be reached), or a stored revision
// that does not parse (nothing is put in force).
func (s *Service) Sync(ctx context.Context) error {
	cur, err := s.store.CurrentPolicy(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.install(ctx, cur)
}

// Wake makes Follow call Sync now instead of at its next poll: the store
// announced a new revision (sqlstore.WatchFuncs.Policy). It never blocks;
// wakes that come while one is pending count once.
func (s *Service) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Follow calls Sync every Options.Poll, and whenever Wake is called, until
// ctx is done, logging errors (the policy in force stays), so this
// instance follows revisions made by others: at once when the store
// announces them, at the next poll when an announcement was lost.
func (s *Service) Follow(ctx context.Context) {
	t := time.NewTicker(s.opts.Poll)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.wake:
		}
		if err := s.Sync(ctx); err != nil && ctx.Err() == nil {
			if !failing {
				s.log.WarnContext(ctx, "read the policy store; the policy in force stays", "err", err)
			}
			failing = true
			continue
		}
		failing = false
	}
}

// Outcome is what Propose did: either Applied with the new Revision, or an
// Approval created (pending) with the widening Reasons. Diff summarises
// the change from the base revision.
type Outcome struct {
	Applied  bool
	Revision store.PolicyRevision
	Approval approval.Request
	Reasons  []string
	Diff     []string
}

// Proposal is the display copy of a proposed policy stored as the
// Arguments of its policy_change approval. Its digest ([policy.Revision]
// of Policy) is the approval's ArgumentsHash.
type Proposal struct {
	BaseRevision int64    `json:"base_revision"`
	Policy       string   `json:"policy"`
	Digest       string   `json:"digest"`
	Diff         []string `json:"diff"`
	Widens       []string `json:"widens"`
}

// Propose proposes p (parsed with Parse) as the successor of revision
// base, by proposer. A change that [policy.Narrows] is stored at once as
// revision base+1. Anything else creates a pending policy_change
// approval (Target "deployment", BaseRevision base, Arguments a
// [Proposal], ArgumentsHash its digest, RequestedBy the proposer, so the
// proposer can never approve it) and applies nothing. Errors: ErrTenant
// when the proposer has a tenant; ErrInvalid when p changes nothing;
// store.ErrConflict when base is not the current revision.
func (s *Service) Propose(ctx context.Context, proposer approval.Principal, base int64, p *policy.Policy) (Outcome, error) {
	if proposer.Tenant != "" {
		return Outcome{}, fmt.Errorf("propose: %w", ErrTenant)
	}
	cur, err := s.store.CurrentPolicy(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return Outcome{}, fmt.Errorf("propose: the policy store has no revision yet: %w", store.ErrConflict)
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("propose: %w", err)
	}
	if cur.Revision != base {
		return Outcome{}, fmt.Errorf("propose: base revision %d is not the current revision %d: %w", base, cur.Revision, store.ErrConflict)
	}
	old, err := decode(cur)
	if err != nil {
		return Outcome{}, fmt.Errorf("propose: %w", err)
	}
	text, digest, err := Canonical(p)
	if err != nil {
		return Outcome{}, err
	}
	diff := policy.Diff(old, p)
	if len(diff) == 0 || digest == cur.Digest {
		return Outcome{}, fmt.Errorf("%w: the proposal is the same as revision %d", ErrInvalid, base)
	}
	now := s.opts.Now()
	ok, reasons := policy.Narrows(old, p)
	if ok {
		rev, err := s.store.AppendPolicy(ctx, base, store.PolicyRevision{Policy: text, Digest: digest, CreatedAt: now,
			CreatedBy: proposer.ID, Diff: diff}, proposer.ID)
		if err != nil {
			return Outcome{}, fmt.Errorf("propose: %w", err)
		}
		if err := s.install(ctx, rev); err != nil {
			s.log.WarnContext(ctx, "install new policy revision", "revision", rev.Revision, "err", err)
		}
		s.log.InfoContext(ctx, "narrowing policy change applied", "revision", rev.Revision, "by", proposer.ID)
		return Outcome{Applied: true, Revision: rev, Diff: diff}, nil
	}
	args, err := json.Marshal(Proposal{BaseRevision: base, Policy: text, Digest: digest, Diff: diff, Widens: reasons})
	if err != nil {
		return Outcome{}, fmt.Errorf("encode proposal: %w", err)
	}
	id, err := approval.NewID()
	if err != nil {
		return Outcome{}, err
	}
	r := approval.Request{
		ID: id, State: approval.StatePending, Arguments: args, ArgumentsHash: digest,
		Rule: RuleName, Mode: policy.ModeRetry, RequestedBy: proposer.ID, OnBehalfOf: proposer.OnBehalfOf,
		Tenant: proposer.Tenant, CreatedAt: now, ExpiresAt: now.Add(s.opts.Timeout), RequiredApprovals: 1,
		Approvers: s.opts.Approvers, ValidFor: s.opts.ValidFor,
		Kind: approval.KindPolicyChange, Target: Target, BaseRevision: base,
	}
	if err := s.store.CreateRequest(ctx, r); err != nil {
		return Outcome{}, fmt.Errorf("propose: %w", err)
	}
	s.log.InfoContext(ctx, "widening policy change awaits approval", "approval", id, "base_revision", base, "by", proposer.ID)
	return Outcome{Approval: store.Normalize(r), Reasons: reasons, Diff: diff}, nil
}

// Apply applies the approved policy_change approval id, by actor, exactly
// once (store.PolicyStore.ApplyPolicyApproval) and puts the new revision
// in force here. The caller checks that actor may (has no tenant).
// Errors: store.ErrNotFound; ErrTenant when the proposal was made by a
// principal with a tenant (before such proposals were refused); an error
// wrapping
// approval.ErrNotApproved when id is not an approved policy_change
// approval (or was invalidated now for another reason); store.ErrConflict
// when the policy moved past its base revision (the approval is then
// invalidated and nothing applies).
func (s *Service) Apply(ctx context.Context, id approval.ID, actor string) (store.PolicyRevision, error) {
	r, err := s.store.GetRequest(ctx, id)
	if err != nil {
		return store.PolicyRevision{}, fmt.Errorf("apply %s: %w", id, err)
	}
	if r.Kind != approval.KindPolicyChange {
		return store.PolicyRevision{}, fmt.Errorf("apply %s: not a policy change: %w", id, approval.ErrNotApproved)
	}
	if r.Tenant != "" {
		return store.PolicyRevision{}, fmt.Errorf("apply %s: proposed in tenant %q: %w", id, r.Tenant, ErrTenant)
	}
	var prop Proposal
	if err := json.Unmarshal(r.Arguments, &prop); err != nil {
		return store.PolicyRevision{}, fmt.Errorf("apply %s: decode proposal: %w", id, err)
	}
	p, err := Parse([]byte(prop.Policy))
	if err != nil {
		return store.PolicyRevision{}, fmt.Errorf("apply %s: %w", id, err)
	}
	text, digest, err := Canonical(p)
	if err != nil {
		return store.PolicyRevision{}, err
	}
	rev, _, err := s.store.ApplyPolicyApproval(ctx, id, store.PolicyRevision{Policy: text, Digest: digest,
		CreatedAt: s.opts.Now(), CreatedBy: r.RequestedBy, Diff: prop.Diff}, actor, s.opts.Now())
	if err != nil && (errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)) {
		rev, err = s.appliedBy(ctx, r, err)
	}
	if err != nil {
		return store.PolicyRevision{}, fmt.Errorf("apply %s: %w", id, err)
	}
	if err := s.install(ctx, rev); err != nil {
		s.log.WarnContext(ctx, "install new policy revision", "revision", rev.Revision, "err", err)
	}
	s.log.InfoContext(ctx, "approved policy change applied", "approval", id, "revision", rev.Revision, "by", actor)
	return rev, nil
}

// appliedBy reads back what an apply of approval r that answered err (a
// store failure) did: the apply transaction may have committed although
// its reply was lost with the connection. The revision it would have made,
// r.BaseRevision+1, made through r, is returned with a nil error; else
// err as it was (nothing is known to have applied).
func (s *Service) appliedBy(ctx context.Context, r approval.Request, err error) (store.PolicyRevision, error) {
	rev, gerr := s.store.GetPolicy(context.WithoutCancel(ctx), r.BaseRevision+1)
	if gerr != nil || rev.ApprovalID != r.ID {
		return store.PolicyRevision{}, err
	}
	s.log.InfoContext(ctx, "approved policy change applied although its write answered an error", "approval", r.ID, "revision", rev.Revision, "err", err)
	return rev, nil
}

// Get returns revision n, or the current one when n is 0. Errors:
// store.ErrNotFound.
func (s *Service) Get(ctx context.Context, n int64) (store.PolicyRevision, error) {
	if n == 0 {
		return s.store.CurrentPolicy(ctx)
	}
	return s.store.GetPolicy(ctx, n)
}

// Diff summarises the change from revision from to revision to
// ([policy.Diff]; nil when they decide alike). Errors: store.ErrNotFound.
func (s *Service) Diff(ctx context.Context, from, to int64) ([]string, error) {
	a, err := s.store.GetPolicy(ctx, from)
	if err != nil {
		return nil, err
	}
	b, err := s.store.GetPolicy(ctx, to)
	if err != nil {
		return nil, err
	}
	pa, err := decode(a)
	if err != nil {
		return nil, err
	}
	pb, err := decode(b)
	if err != nil {
		return nil, err
	}
	return policy.Diff(pa, pb), nil
}
