package policy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Effect is what a rule or the default does with a call.
type Effect string

const (
	Allow   Effect = "allow"
	Deny    Effect = "deny"
	Approve Effect = "approve"
)

// Valid reports whether e is allow, deny or approve.
func (e Effect) Valid() bool { return e == Allow || e == Deny || e == Approve }

// Waiting modes of an approval; see DESIGN "Waiting modes".
const (
	ModeHold  = "hold"
	ModeRetry = "retry"
)

// DefaultRule is the Decision.Rule of a decision taken by Policy.Default.
const DefaultRule = "default"

// GroupPrefix marks an Approvers entry that names a group ("group:ops")
// rather than a principal id.
const GroupPrefix = "group:"

// Approval holds the parameters of an approval. In Policy.Approval every
// field is required; in a Rule each zero field inherits the policy's value.
// A policy document that writes a zero into a rule's approval ("approvals:
// 0") is refused where it is decoded (see [ExplicitZeros]): the field is
// zero only when the document leaves it out.
type Approval struct {
	// Timeout is how long a request may stay pending before it expires.
	Timeout time.Duration `yaml:"timeout,omitempty"`
	// Mode is "hold" (the call waits) or "retry" (the call returns at once
	// and the agent re-sends it).
	Mode string `yaml:"mode,omitempty"`
	// Approvals is how many distinct eligible approvals settle a request.
	Approvals int `yaml:"approvals,omitempty"`
	// Approvers lists who may review: principal ids and "group:<name>"
	// entries. Empty means anyone with the approver or admin role.
	Approvers []string `yaml:"approvers,omitempty"`
	// ValidFor is how long an approved request stays usable before it is
	// consumed.
	ValidFor time.Duration `yaml:"valid_for,omitempty"`
	// Grants says whether approvers may remember an approval of the call as
	// a grant (docs/policy.md "Remembered grants"): nil inherits (true in
	// Policy.Approval, which keeps grants allowed), false forbids them. A
	// decision whose Grants is false makes no grant and is never admitted
	// by one; several matching approve rules forbid grants when any does.
	Grants *bool `yaml:"grants,omitempty"`
}

// GrantsAllowed reports whether a decision with approval parameters a lets
// a grant be made for its call or stand in for its approval: false only
// when Grants is set to false.
func (a Approval) GrantsAllowed() bool { return a.Grants == nil || *a.Grants }

// Rule matches calls and yields an Effect. A rule matches a call when its
// server and tools match the call's real names and every selector it sets
// (When, Command, Annotations, Principals) holds; see docs/policy.md.
type Rule struct {
	// Name identifies the rule in decisions and approvals; empty means
	// "rule[<index>]" (see Policy.RuleName).
	Name string `yaml:"name,omitempty"`
	// Server is a glob on the real server name; empty matches any server.
	// A name without metacharacters matches only itself.
	Server string `yaml:"server,omitempty"`
	// Tools are globs on the real tool name (never the exposed
	// "<server>__<tool>" alias); an empty entry matches any tool.
	Tools []string `yaml:"tools,omitempty"`
	// Resources are globs on the real resource URI (never the namespaced
	// form), Prompts globs on the real prompt name; an empty entry matches
	// any. A rule matches the kinds it names a selector for; a rule with none
	// of Tools, Resources and Prompts matches every tool, resource and prompt
	// of its servers (issue 10).
	Resources []string `yaml:"resources,omitempty"`
	Prompts   []string `yaml:"prompts,omitempty"`
	// Effect is allow, deny or approve.
	Effect Effect `yaml:"effect"`
	// Approval overrides the policy's approval parameters for an approve
	// rule; nil or zero fields inherit Policy.Approval. It must be nil on
	// other rules.
	Approval *Approval `yaml:"approval,omitempty"`
	// When is a CEL expression over args, principal, server, tool, session
	// and annotations that must evaluate to true (see [Call] and
	// docs/policy.md); empty means no condition. It is parsed and
	// type-checked by Validate. An evaluation error never allows: an
	// erroring allow rule does not match, an erroring deny or approve rule
	// matches.
	When string `yaml:"when,omitempty"`
	// Command, when set, parses one string argument as a shell command and
	// matches its simple commands against patterns (see [CommandMatch]).
	Command *CommandMatch `yaml:"command,omitempty"`
	// Annotations selects tools by their MCP annotation hints; honoured only
	// for servers whose annotations are trusted (see [AnnotationSelector]).
	Annotations *AnnotationSelector `yaml:"annotations,omitempty"`
	// Principals, when not empty, limits the rule to calls by these
	// principal ids and members of "group:<name>" entries.
	Principals []string `yaml:"principals,omitempty"`
	// Monitor puts a deny or approve rule in monitor mode (true: its
	// decision is recorded as would_deny or would_hold and the call
	// proceeds as if the rule did not exist) or keeps it enforced even when
	// policy.enforce is false (false). nil follows Policy.Enforce.
	Monitor *bool `yaml:"monitor,omitempty"`
	// ChatApproval, on an approve rule, lets approvers decide the requests
	// this rule names (approval.Request.Rule) from a chat message (Slack
	// buttons; see internal/notify). It is off by default because a chat
	// identity is weaker than an approver's token: a Slack account has no
	// MFA of toolgate's and may be shared or taken over. It must be false on
	// other rules.
	ChatApproval bool `yaml:"chat_approval,omitempty"`
}

// ChatApproval reports whether requests that name rule (their
// approval.Request.Rule) may be decided from a chat message: rule names an
// approve rule of p with ChatApproval set. The default decision and names p
// does not have (such as "session require_approval") never may.
func (p *Policy) ChatApproval(rule string) bool {
	for i := range p.Rules {
		if p.RuleName(i) == rule {
			return p.Rules[i].Effect == Approve && p.Rules[i].ChatApproval
		}
	}
	return false
}

// ArgumentDependent reports whether the rule matches a call can
// depend on the call's arguments (it has a When or a Command selector).
func (r *Rule) ArgumentDependent() bool { return r.When != "" || r.Command != nil }

// Where the deployment policy comes from (Policy.Source); see issue 6.
const (
	// SourceFile: the config file; SIGHUP (and serve --watch) reloads it.
	SourceFile = "file"
	// SourceStore: policy revisions kept in the database.
	SourceStore = "store"
)

// Policy is an ordered list of rules, a default effect, and default
// approval parameters.
type Policy struct {
	Default  Effect   `yaml:"default"`
	Approval Approval `yaml:"approval"`
	Rules    []Rule   `yaml:"rules,omitempty"`
	// Enforce, when false, puts the whole policy in monitor mode: every
	// rule without "monitor: false", and the default, only records what it
	// would have done (would_deny, would_hold) and the call proceeds. nil
	// means true.
	Enforce *bool `yaml:"enforce,omitempty"`
	// ListDenied keeps tools that the policy denies to a caller, whatever
	// the arguments, in that caller's tools/list. false (the default) hides
	// them ([Evaluator.DeniedRegardless]).
	ListDenied bool `yaml:"list_denied,omitempty"`
	// Source says where the deployment policy comes from: SourceFile
	// (the default; "" means the same) or SourceStore. It is deployment
	// configuration, not policy content: Evaluate, Narrows, Diff and
	// Revision ignore it, and the config package validates it.
	Source string `yaml:"source,omitempty"`
}

// Enforced reports whether the policy is enforced (Enforce is nil or true).
func (p *Policy) Enforced() bool { return p.Enforce == nil || *p.Enforce }

// monitored reports whether rule r of p only records what it would do.
func (p *Policy) monitored(r *Rule) bool {
	if r.Monitor != nil {
		return *r.Monitor
	}
	return !p.Enforced()
}

// InMonitorMode lists what in p is in monitor mode, in words ("policy.enforce
// is false", `rule "x" (monitor: true)`), or nil when everything is
// enforced; serve warns at start while it is not empty.
func (p *Policy) InMonitorMode() []string {
	var out []string
	if !p.Enforced() {
		out = append(out, "policy.enforce is false: the default and every rule without monitor: false only record what they would do")
	}
	for i := range p.Rules {
		if r := &p.Rules[i]; r.Monitor != nil && *r.Monitor {
			out = append(out, fmt.Sprintf("rule %q has monitor: true", p.RuleName(i)))
		}
	}
	return out
}

// Principal is the caller as rules see it.
type Principal struct {
	// ID is the principal id ("session:<id>" for an agent session).
	ID string
	// Groups are the principal's groups, matched by "group:<name>" entries.
	Groups []string
	// Tenant and OnBehalfOf are visible to When conditions.
	Tenant     string
	OnBehalfOf string
}

// Call is what a policy decides about: what the call uses (its kind and
// real name on the real server), who calls, and, for argument-dependent
// rules, the raw arguments.
type Call struct {
	// Kind is KindTool (or ""), KindResource or KindPrompt; the name is in
	// Tool, Resource or Prompt accordingly.
	Kind      Kind
	Server    string
	Tool      string
	Resource  string // the real resource URI
	Prompt    string // the real prompt name
	Principal Principal
	// Session is the agent session id of the caller, "" for none.
	Session string
	// Arguments are the raw JSON bytes of the call's arguments (an object;
	// nil or JSON null mean {}). They are decoded only when a candidate
	// rule has a When or Command, and at most once per evaluation.
	Arguments json.RawMessage
	// Annotations are the tool's annotation hints, or nil when they are
	// unknown or not trusted (servers.<name>.trust_annotations is false):
	// annotation selectors then take the strictest reading.
	Annotations *Annotations
	// Grants are remembered approvals of the caller for this server and
	// tool, read by the gate from the store (issue 12). They are looked at
	// only when the decision would be approve: the first that matches
	// ([Evaluator.MatchGrant]) turns it into an allow (Decision.Grant).
	Grants []Grant
	// Now is the time grants are checked at (their expiry); it is needed
	// only with Grants, and a zero Now matches no grant.
	Now time.Time
	// Decoded, when not nil, is what an earlier evaluation of this call
	// decoded (its Decision.Decoded): an evaluation of the same arguments
	// (byte for byte) reads them from it instead of decoding them again.
	// The gate evaluates a held call again for the caller's grants.
	Decoded *Decoded
}

// Monitor verdicts: what a rule in monitor mode would have done.
const (
	WouldDeny = "would_deny"
	WouldHold = "would_hold"
)

// Monitor is the monitor-mode part of a Decision: what the policy would
// have decided had every rule been enforced, when that is stricter than the
// enforced decision. The zero value means nothing in monitor mode changed
// the outcome.
type Monitor struct {
	// Verdict is WouldDeny or WouldHold ("" for none).
	Verdict string `json:"verdict,omitempty"`
	// Rule names the rule (or DefaultRule) that would have decided.
	Rule string `json:"rule,omitempty"`
}

// RuleError is an error met while evaluating a rule's selectors (a CEL
// evaluation error, a command that cannot be parsed, arguments that are not
// a JSON object). It never allows: see Rule.When.
type RuleError struct {
	Rule string
	Err  error
}

// Decision is the outcome of an evaluation.
type Decision struct {
	Effect Effect
	// Rule names the deciding rule, or is DefaultRule when no rule matched.
	// For deny, approve and allow it is the first matching enforced rule of
	// that effect in file order.
	Rule string
	// Matched lists every matching rule name in file order, monitored ones
	// included.
	Matched []string
	// Approval holds the combined approval parameters; it is set only when
	// Effect is Approve.
	Approval Approval
	// TimeoutRule names the rule whose timeout Approval.Timeout is: the
	// first matching approve rule with the shortest, which need not be
	// Rule; Rule itself when the default decides. Set only when Effect is
	// Approve.
	TimeoutRule string
	// NoEligibleApprovers is true when matching approve rules name approver
	// lists with nothing in common, so nobody can review the call; the
	// gate refuses such a call. Approval.Approvers is then empty, which on
	// its own would mean "anyone": always check this flag first.
	NoEligibleApprovers bool
	// Monitor says what monitor mode kept from happening; zero when nothing.
	Monitor Monitor
	// Errors lists the selector errors met on the way (each counted as a
	// match for deny and approve rules and as no match for allow rules).
	// Their text may quote argument values: do not log it.
	Errors []RuleError
	// Unseen is true when the deciding rule's command selector matched
	// only because it cannot read the command in full (it does not parse,
	// or runs code the matcher cannot read: a shell, an interpreter's
	// inline code, a file a program later runs, ...), which deny and
	// approve rules count as a match; false when one of the simple
	// commands it read matches a pattern. It quotes nothing.
	Unseen bool
	// Revision is the revision of the evaluated policy when it was compiled
	// with one ([Compile]); "" otherwise.
	Revision string
	// Grant is the id of the grant (one of Call.Grants) that turned an
	// approve decision into this allow; "" otherwise. Rule, Matched and
	// Approval then still say which approval the grant stood in for.
	Grant string
	// Decoded is what this evaluation decoded of the call's arguments
	// (nil when no rule or grant read them), for Call.Decoded of a later
	// evaluation of the same call. It holds the decoded arguments: a
	// caller that keeps the Decision longer than the call's admission
	// should drop it.
	Decoded *Decoded
}

// RuleName returns the name of p.Rules[i]: its Name, or "rule[<i>]" if the
// name is empty.
func (p *Policy) RuleName(i int) string {
	if n := p.Rules[i].Name; n != "" {
		return n
	}
	return fmt.Sprintf("rule[%d]", i)
}

// Normalize fills in empty rule names with "rule[<index>]". Evaluate does
// not need it; it makes names visible to code that lists rules.
func (p *Policy) Normalize() {
	for i := range p.Rules {
		p.Rules[i].Name = p.RuleName(i)
	}
}

// Evaluate decides c. Precedence does not depend on rule order: if any
// matching rule denies, the call is denied; else if any approves, it needs
// approval; else if any allows, it is allowed; with no match, p.Default
// decides. Rules in monitor mode do not take part in that decision; see
// [Decision.Monitor]. Matching approve rules combine as follows (each
// rule's zero fields first inherit p.Approval): the largest Approvals, the
// shortest Timeout and ValidFor, the Mode of the first in file order, Grants false when any rule forbids
// grants, and
// the intersection of the non-empty Approvers lists as literal entries (an
// empty list means anyone and does not narrow; "group:ops" and "alice" have
// nothing in common even if alice is in ops). An empty intersection sets
// NoEligibleApprovers.
//
// Evaluate compiles p for this one call; code that evaluates many calls
// compiles once ([Compile], or a [Holder]). It returns an error, with a
// Decision whose Effect is Deny, if p does not compile (see
// [Policy.Validate]); callers must refuse the call (fail closed). Errors of
// a rule's selectors are not errors of Evaluate: they decide whether the
// rule matches (see Rule.When) and are listed in Decision.Errors. Evaluate
// does not modify p.
func (p *Policy) Evaluate(c Call) (Decision, error) {
	e, err := compile(p, "")
	if err != nil {
		return Decision{Effect: Deny, Rule: DefaultRule}, err
	}
	return e.Evaluate(c)
}

// Holds reports whether rule i of p can hold a call on its own: an
// approve rule not in monitor mode (its monitor, else policy.enforce).
// It returns the approval parameters such a call gets from it alone
// (its zero fields from p.Approval, as Evaluate takes them); several
// approve rules that match one call combine further (see Evaluate).
func (p *Policy) Holds(i int) (Approval, bool) {
	r := &p.Rules[i]
	if r.Effect != Approve || p.monitored(r) {
		return Approval{}, false
	}
	return p.effective(r), true
}

// effective returns the rule's approval parameters with zero fields taken
// from the policy defaults.
func (p *Policy) effective(r *Rule) Approval {
	a := p.Approval
	if o := r.Approval; o != nil {
		if o.Timeout != 0 {
			a.Timeout = o.Timeout
		}
		if o.Mode != "" {
			a.Mode = o.Mode
		}
		if o.Approvals != 0 {
			a.Approvals = o.Approvals
		}
		if len(o.Approvers) > 0 {
			a.Approvers = o.Approvers
		}
		if o.ValidFor != 0 {
			a.ValidFor = o.ValidFor
		}
		if o.Grants != nil {
			a.Grants = o.Grants
		}
	}
	a.Approvers = slices.Clone(a.Approvers)
	return a
}

// ruleLabel names rule i in error messages: rules[2] or rules[2] "name".
func ruleLabel(p *Policy, i int) string {
	if n := p.Rules[i].Name; n != "" {
		return fmt.Sprintf("rules[%d] %q", i, n)
	}
	return fmt.Sprintf("rules[%d]", i)
}

// Validate reports every problem in p, each prefixed with where it is
// ("default", "approval.timeout", `rules[2] "never delete"`): an invalid
// default or rule effect; policy approval parameters that are missing or
// out of range (timeout > 0, mode hold|retry, approvals >= 1,
// valid_for > 0); rule overrides that are negative or an invalid mode, or
// set on a rule whose effect is not approve; empty approver entries; globs
// that do not parse (wrapping ErrBadPattern); When conditions that do not
// parse or type-check, or are not bool; command selectors without an
// argument or with an empty pattern; empty annotation selectors; bad
// principals entries; monitor on an allow rule; and rule names, explicit or
// defaulted, that repeat or are "default". It returns nil if p is valid.
// Each error is a *[FieldError] naming the rule and key it is about.
func (p *Policy) Validate() []error {
	var errs []error
	top := func(format string, args ...any) { errs = append(errs, fieldError(-1, fmt.Errorf(format, args...))) }
	if !p.Default.Valid() {
		top("default %q: want allow, deny or approve", p.Default)
	}
	a := p.Approval
	if a.Timeout <= 0 {
		top("approval.timeout %s: must be > 0", a.Timeout)
	}
	if a.Mode != ModeHold && a.Mode != ModeRetry {
		top("approval.mode %q: want hold or retry", a.Mode)
	}
	if a.Approvals < 1 {
		top("approval.approvals %d: must be >= 1 (for calls that need no approval, use effect: allow)", a.Approvals)
	}
	if a.ValidFor <= 0 {
		top("approval.valid_for %s: must be > 0", a.ValidFor)
	}
	for _, err := range validateApprovers(a.Approvers) {
		top("approval.%w", err)
	}

	env, envErr := envFor(p)
	names := map[string]int{}
	for i := range p.Rules {
		r := &p.Rules[i]
		label := ruleLabel(p, i)
		add := func(format string, args ...any) {
			fe := fieldError(i, fmt.Errorf(format, args...))
			fe.Err = fmt.Errorf("%s: %w", label, fe.Err)
			errs = append(errs, fe)
		}
		name := p.RuleName(i)
		if name == DefaultRule {
			add("name %q is reserved for decisions taken by the default", DefaultRule)
		} else if j, dup := names[name]; dup {
			add("name %q is also used by rules[%d]", name, j)
		} else {
			names[name] = i
		}
		_, rerrs := compileRule(p, i, env, envErr)
		for _, err := range rerrs {
			add("%w", err)
		}
		if r.ChatApproval && r.Effect != Approve {
			add("chat_approval is set but effect is %q; only approve rules can be decided from chat", r.Effect)
		}
		if r.Approval == nil {
			continue
		}
		if r.Effect != Approve {
			add("approval is set but effect is %q; only approve rules take approval parameters", r.Effect)
			continue
		}
		o := r.Approval
		if o.Timeout < 0 {
			add("approval.timeout %s: must be > 0 (or omitted to inherit)", o.Timeout)
		}
		if o.Mode != "" && o.Mode != ModeHold && o.Mode != ModeRetry {
			add("approval.mode %q: want hold or retry", o.Mode)
		}
		if o.Approvals < 0 {
			add("approval.approvals %d: must be >= 1 (or omitted to inherit)", o.Approvals)
		}
		if o.ValidFor < 0 {
			add("approval.valid_for %s: must be > 0 (or omitted to inherit)", o.ValidFor)
		}
		for _, err := range validateApprovers(o.Approvers) {
			add("approval.%w", err)
		}
	}
	return errs
}

func validateApprovers(list []string) []error {
	var errs []error
	for k, s := range list {
		switch {
		case strings.TrimSpace(s) == "":
			errs = append(errs, fmt.Errorf("approvers[%d]: empty entry", k))
		case s == GroupPrefix:
			errs = append(errs, fmt.Errorf("approvers[%d] %q: group name is empty", k, s))
		case strings.TrimSpace(s) != s:
			errs = append(errs, fmt.Errorf("approvers[%d] %q: leading or trailing space", k, s))
		}
	}
	return errs
}
