package policy

import (
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
}

// Rule matches calls and yields an Effect.
type Rule struct {
	// Name identifies the rule in decisions and approvals; empty means
	// "rule[<index>]" (see Policy.RuleName).
	Name string `yaml:"name,omitempty"`
	// Server is a glob on the real server name; empty matches any server.
	// A name without metacharacters matches only itself.
	Server string `yaml:"server,omitempty"`
	// Tools are globs on the real tool name (never the exposed
	// "<server>__<tool>" alias); an empty list or an empty entry matches any
	// tool.
	Tools []string `yaml:"tools,omitempty"`
	// Effect is allow, deny or approve.
	Effect Effect `yaml:"effect"`
	// Approval overrides the policy's approval parameters for an approve
	// rule; nil or zero fields inherit Policy.Approval. It must be nil on
	// other rules.
	Approval *Approval `yaml:"approval,omitempty"`
}

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
	// Source says where the deployment policy comes from: SourceFile
	// (the default; "" means the same) or SourceStore. It is deployment
	// configuration, not policy content: Evaluate, Narrows, Diff and
	// Revision ignore it, and the config package validates it.
	Source string `yaml:"source,omitempty"`
}

// Call is what a policy decides about: the real server and tool names, and
// the id of the calling principal (not used by rules yet).
type Call struct {
	Server    string
	Tool      string
	Principal string
}

// Decision is the outcome of Policy.Evaluate.
type Decision struct {
	Effect Effect
	// Rule names the deciding rule, or is DefaultRule when no rule matched.
	// For deny, approve and allow it is the first matching rule of that
	// effect in file order.
	Rule string
	// Matched lists every matching rule name in file order.
	Matched []string
	// Approval holds the combined approval parameters; it is set only when
	// Effect is Approve.
	Approval Approval
	// NoEligibleApprovers is true when matching approve rules name approver
	// lists with nothing in common, so nobody can review the call; the
	// gate refuses such a call. Approval.Approvers is then empty, which on
	// its own would mean "anyone": always check this flag first.
	NoEligibleApprovers bool
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
// decides. Matching approve rules combine as follows (each rule's zero
// fields first inherit p.Approval): the largest Approvals, the shortest
// Timeout and ValidFor, the Mode of the first in file order, and the
// intersection of the non-empty Approvers lists as literal entries (an
// empty list means anyone and does not narrow; "group:ops" and "alice" have
// nothing in common even if alice is in ops). An empty intersection sets
// NoEligibleApprovers.
//
// Evaluate returns an error, with a Decision whose Effect is Deny, if a
// rule's glob does not parse, a matching rule's effect is not valid, or the
// default decides and is not valid; callers
// must refuse the call (fail closed). Evaluate does not modify p.
func (p *Policy) Evaluate(c Call) (Decision, error) {
	var matched []int
	for i := range p.Rules {
		ok, err := p.Rules[i].matches(c)
		if err != nil {
			return Decision{Effect: Deny, Rule: p.RuleName(i)}, fmt.Errorf("policy %s: %w", ruleLabel(p, i), err)
		}
		if !ok {
			continue
		}
		if e := p.Rules[i].Effect; !e.Valid() {
			return Decision{Effect: Deny, Rule: p.RuleName(i)}, fmt.Errorf("policy %s: effect %q: want allow, deny or approve", ruleLabel(p, i), e)
		}
		matched = append(matched, i)
	}
	d := Decision{}
	for _, i := range matched {
		d.Matched = append(d.Matched, p.RuleName(i))
	}
	first := func(e Effect) (int, bool) {
		for _, i := range matched {
			if p.Rules[i].Effect == e {
				return i, true
			}
		}
		return 0, false
	}
	for _, e := range []Effect{Deny, Approve, Allow} {
		i, ok := first(e)
		if !ok {
			continue
		}
		d.Effect, d.Rule = e, p.RuleName(i)
		if e == Approve {
			d.Approval, d.NoEligibleApprovers = p.combine(matched)
		}
		return d, nil
	}
	if !p.Default.Valid() {
		return Decision{Effect: Deny, Rule: DefaultRule, Matched: d.Matched}, fmt.Errorf("policy default %q: want allow, deny or approve", p.Default)
	}
	d.Effect, d.Rule = p.Default, DefaultRule
	if d.Effect == Approve {
		d.Approval = p.Approval
		d.Approval.Approvers = slices.Clone(p.Approval.Approvers)
	}
	return d, nil
}

func (r *Rule) matches(c Call) (bool, error) {
	if r.Server != "" {
		ok, err := Match(r.Server, c.Server)
		if err != nil || !ok {
			return false, err
		}
	}
	if len(r.Tools) == 0 {
		return true, nil
	}
	// Check every pattern, so a bad glob is reported whatever the tool.
	hit := false
	for _, t := range r.Tools {
		if t == "" {
			hit = true
			continue
		}
		ok, err := Match(t, c.Tool)
		if err != nil {
			return false, err
		}
		hit = hit || ok
	}
	return hit, nil
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
	}
	a.Approvers = slices.Clone(a.Approvers)
	return a
}

// combine merges the approval parameters of the matching approve rules
// (indices in file order). See Evaluate for the rules.
func (p *Policy) combine(matched []int) (Approval, bool) {
	var out Approval
	seen := false
	narrowed := false // out.Approvers holds a real (non-"anyone") list
	for _, i := range matched {
		r := &p.Rules[i]
		if r.Effect != Approve {
			continue
		}
		a := p.effective(r)
		if !seen {
			out, seen = a, true
			out.Approvers = dedupe(a.Approvers)
			narrowed = len(out.Approvers) > 0
			continue
		}
		out.Approvals = max(out.Approvals, a.Approvals)
		out.Timeout = min(out.Timeout, a.Timeout)
		out.ValidFor = min(out.ValidFor, a.ValidFor)
		switch {
		case len(a.Approvers) == 0:
			// anyone: does not narrow
		case !narrowed:
			out.Approvers = dedupe(a.Approvers)
			narrowed = true
		default:
			out.Approvers = slices.DeleteFunc(out.Approvers, func(s string) bool { return !slices.Contains(a.Approvers, s) })
		}
	}
	if narrowed && len(out.Approvers) == 0 {
		out.Approvers = nil
		return out, true
	}
	return out, false
}

func dedupe(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
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
// that do not parse (wrapping ErrBadPattern); and rule names, explicit or
// defaulted, that repeat or are "default". It returns nil if p is valid.
func (p *Policy) Validate() []error {
	var errs []error
	if !p.Default.Valid() {
		errs = append(errs, fmt.Errorf("default %q: want allow, deny or approve", p.Default))
	}
	a := p.Approval
	if a.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("approval.timeout %s: must be > 0", a.Timeout))
	}
	if a.Mode != ModeHold && a.Mode != ModeRetry {
		errs = append(errs, fmt.Errorf("approval.mode %q: want hold or retry", a.Mode))
	}
	if a.Approvals < 1 {
		errs = append(errs, fmt.Errorf("approval.approvals %d: must be >= 1", a.Approvals))
	}
	if a.ValidFor <= 0 {
		errs = append(errs, fmt.Errorf("approval.valid_for %s: must be > 0", a.ValidFor))
	}
	for _, err := range validateApprovers(a.Approvers) {
		errs = append(errs, fmt.Errorf("approval.%w", err))
	}

	names := map[string]int{}
	for i := range p.Rules {
		r := &p.Rules[i]
		label := ruleLabel(p, i)
		add := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf(label+": "+format, args...))
		}
		name := p.RuleName(i)
		if name == DefaultRule {
			add("name %q is reserved for decisions taken by the default", DefaultRule)
		} else if j, dup := names[name]; dup {
			add("name %q is also used by rules[%d]", name, j)
		} else {
			names[name] = i
		}
		if !r.Effect.Valid() {
			add("effect %q: want allow, deny or approve", r.Effect)
		}
		if r.Server != "" {
			if _, err := compile(r.Server); err != nil {
				add("server: %w", err)
			}
		}
		for k, t := range r.Tools {
			if _, err := compile(t); err != nil {
				add("tools[%d]: %w", k, err)
			}
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
