package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// change is one difference between two policies: text describes it
// neutrally (for Diff); widens is set, with why, when the narrowing check
// refuses it.
type change struct {
	text   string
	widens bool
	why    string
}

func (c change) reason() string {
	if c.why == "" {
		return c.text
	}
	return c.text + ": " + c.why
}

// Narrows reports whether replacing old by new can only make decisions
// stricter, judged per call: for every possible call the new effect must be
// at least as strict as the old (deny > approve > allow) and no approval
// parameter may weaken. It is a conservative structural check (issue 6;
// docs/policy.md states the same rules) that accepts a change only if every
// part of it is one of:
//
//   - adding a deny rule;
//   - adding an approve rule when the default is not deny; when the default
//     is approve the added rule must not set its own approvers or mode, and
//     its own approvals (if set) must be no lower and its timeout and
//     valid_for (if set) no longer than the default approval's;
//   - removing an allow rule;
//   - raising required approvals (policy.approval.approvals, or an existing
//     approve rule's effective approvals);
//   - shortening timeouts: the timeout or valid_for of the default approval
//     or the effective timeout or valid_for of an existing approve rule;
//   - enforcing what was in monitor mode: policy.enforce from false to
//     true, or a kept deny or approve rule leaving monitor mode;
//   - changing policy.list_denied (it decides what callers see, not what
//     they may call);
//   - turning chat_approval off on a kept rule.
//
// Everything else counts as widening, among them: any change of the default
// effect (even to deny), of the default or a rule's approvers (who may
// approve) or mode, of a kept rule's effect, server or tools, or of its
// when, command, annotations or principals selector (only an added deny
// rule may carry selectors); putting a rule or the whole policy in monitor
// mode; lowering
// approvals; lengthening a timeout or valid_for; removing a deny or approve
// rule; adding an allow rule; turning chat_approval on, or adding an
// approve rule that has it; reordering kept rules (the mode of a call
// that several approve rules match is the first one's in file order); and
// an added approve rule placed before a kept approve rule whose effective
// mode differs from its own. If either policy is invalid ([Policy.Validate])
// the change does not narrow.
//
// Rules are paired by name ([Policy.RuleName]): a rule whose name exists in
// both is kept (and compared field by field), otherwise it is removed or
// added. An unnamed rule is named by its position, "rule[<i>]", so
// inserting or removing an unnamed rule before others renames them; the
// check then sees changed or removed rules and refuses. Name rules whose
// policy may change. Source is ignored. Tools and approvers lists are
// compared as sets.
//
// Remembered grants ([Grant]) are not policy and are not judged here: a
// grant applies only where the policy in force decides approve, with that
// decision's quorum and approvers ([Evaluator.MatchGrant]), so a change
// this function accepts stays narrowing whatever grants exist (a new deny
// rule beats every grant; more approvals or other approvers sideline
// grants approved by too few or by approvers no longer named).
//
// When ok is true, reasons lists what narrows (nil if nothing changed).
// When ok is false, reasons lists each widening part, in words, such as
// `rule "x": tools changed from [a] to [a b]: ...`.
func Narrows(old, new *Policy) (ok bool, reasons []string) {
	var bad []string
	if errs := old.Validate(); len(errs) > 0 {
		bad = append(bad, fmt.Sprintf("the current policy is invalid (%v)", errs[0]))
	}
	if errs := new.Validate(); len(errs) > 0 {
		for _, err := range errs {
			bad = append(bad, fmt.Sprintf("the new policy is invalid: %v", err))
		}
	}
	if len(bad) > 0 {
		return false, bad
	}
	var good []string
	for _, c := range compare(old, new) {
		if c.widens {
			bad = append(bad, c.reason())
		} else {
			good = append(good, c.reason())
		}
	}
	if len(bad) > 0 {
		return false, bad
	}
	return true, good
}

// Diff summarises the differences from old to new for people, one line per
// change, in a fixed order: the default effect, the default approval
// parameters, then rules of new in file order (changed or added), then
// removed rules, then reordering. It returns nil when the policies decide
// alike field by field (Source and rule-name defaulting aside).
func Diff(old, new *Policy) []string {
	var out []string
	for _, c := range compare(old, new) {
		out = append(out, c.text)
	}
	return out
}

// compare lists the changes from o to n, marking those that widen.
func compare(o, n *Policy) []change {
	var out []change
	add := func(c change) { out = append(out, c) }

	if o.Default != n.Default {
		add(change{text: fmt.Sprintf("default changed from %s to %s", o.Default, n.Default), widens: true, why: "any change of the default counts as widening"})
	}
	out = append(out, compareApproval("approval", o.Approval, n.Approval)...)
	if oe, ne := o.Enforced(), n.Enforced(); oe != ne {
		if ne {
			add(change{text: "policy.enforce changed from false to true"})
		} else {
			add(change{text: "policy.enforce changed from true to false", widens: true, why: "in monitor mode the default and rules without monitor: false no longer deny or hold"})
		}
	}
	if o.ListDenied != n.ListDenied {
		// Listing decides what callers see, not what they may call.
		add(change{text: fmt.Sprintf("policy.list_denied changed from %v to %v", o.ListDenied, n.ListDenied)})
	}

	oIdx := ruleIndex(o)
	nIdx := ruleIndex(n)

	// Kept and added rules, in new file order.
	for j := range n.Rules {
		name := n.RuleName(j)
		nr := &n.Rules[j]
		i, kept := oIdx[name]
		if !kept {
			add(addedRule(o, n, j))
			continue
		}
		or := &o.Rules[i]
		label := fmt.Sprintf("rule %q", name)
		if or.Effect != nr.Effect {
			add(change{text: fmt.Sprintf("%s: effect changed from %s to %s", label, or.Effect, nr.Effect), widens: true, why: "changing a rule's effect counts as widening (remove it and add a rule under a new name instead)"})
		}
		if or.Server != nr.Server {
			add(change{text: fmt.Sprintf("%s: server changed from %q to %q", label, or.Server, nr.Server), widens: true, why: "any change of a rule's match counts as widening"})
		}
		if !sameSet(or.Tools, nr.Tools) {
			add(change{text: fmt.Sprintf("%s: tools changed from %s to %s", label, list(or.Tools), list(nr.Tools)), widens: true, why: "any change of a rule's match counts as widening"})
		}
		out = append(out, compareSelectors(label, or, nr)...)
		for _, sc := range selectorChanges(or, nr) {
			add(change{text: label + ": " + sc, widens: true, why: "any change of a rule's when, command, annotations or principals selector counts as widening"})
		}
		if om, nm := o.monitored(or), n.monitored(nr); om != nm && or.Effect == nr.Effect && or.Effect != Allow {
			if om {
				add(change{text: label + ": now enforced (was in monitor mode)"})
			} else {
				add(change{text: label + ": now in monitor mode (was enforced)", widens: true, why: "a rule in monitor mode no longer denies or holds"})
			}
		}
		if or.Effect == Approve && nr.Effect == Approve {
			out = append(out, compareApproval(label+": approval", o.effective(or), n.effective(nr))...)
		}
		switch {
		case !or.ChatApproval && nr.ChatApproval:
			add(change{text: fmt.Sprintf("%s: chat_approval turned on", label), widens: true, why: "deciding from chat is a weaker identity than an approver's token"})
		case or.ChatApproval && !nr.ChatApproval:
			add(change{text: fmt.Sprintf("%s: chat_approval turned off", label)})
		}
	}
	// Removed rules, in old file order.
	for i := range o.Rules {
		name := o.RuleName(i)
		if _, ok := nIdx[name]; ok {
			continue
		}
		r := &o.Rules[i]
		c := change{text: fmt.Sprintf("rule %q removed (%s%s)", name, r.Effect, matchText(r))}
		if r.Effect != Allow {
			c.widens, c.why = true, fmt.Sprintf("removing a%s %s rule counts as widening", article(r.Effect), r.Effect)
		}
		add(c)
	}
	// Reordering of kept rules.
	var oldOrder, newOrder []string
	for i := range o.Rules {
		if _, ok := nIdx[o.RuleName(i)]; ok {
			oldOrder = append(oldOrder, o.RuleName(i))
		}
	}
	for j := range n.Rules {
		if _, ok := oIdx[n.RuleName(j)]; ok {
			newOrder = append(newOrder, n.RuleName(j))
		}
	}
	if !slices.Equal(oldOrder, newOrder) {
		add(change{text: fmt.Sprintf("rules reordered from %s to %s", quoted(oldOrder), quoted(newOrder)), widens: true, why: "reordering rules can change the waiting mode of a call that several approve rules match"})
	}
	return out
}

// addedRule judges rule j of n, which o does not have.
func addedRule(o, n *Policy, j int) change {
	r := &n.Rules[j]
	name := n.RuleName(j)
	c := change{text: fmt.Sprintf("rule %q added (%s%s%s%s)", name, r.Effect, matchText(r), approvalText(r.Approval), chatText(r))}
	switch r.Effect {
	case Deny:
		return c
	case Approve:
		if hasSelector(r) {
			c.widens, c.why = true, "only an added deny rule may carry a when, command, annotations or principals selector (an approve rule's selectors decide which calls keep the default's effect)"
			return c
		}
	}
	switch r.Effect {
	case Allow:
		c.widens, c.why = true, "adding an allow rule counts as widening"
		return c
	case Approve:
	default:
		c.widens, c.why = true, fmt.Sprintf("effect %q is not valid", r.Effect)
		return c
	}
	var why []string
	if r.ChatApproval {
		why = append(why, "it can be decided from chat (chat_approval), a weaker identity than an approver's token")
	}
	switch o.Default {
	case Deny:
		why = append(why, "the default is deny, so calls it matches were denied before")
	case Approve:
		// Calls that only the default approved now take this rule's
		// parameters instead of the default's.
		d, a := n.Approval, r.Approval
		if a != nil {
			if len(a.Approvers) > 0 {
				why = append(why, "with default approve, an added approve rule must not name its own approvers")
			}
			if a.Mode != "" && a.Mode != d.Mode {
				why = append(why, fmt.Sprintf("with default approve, its mode %s differs from the default's %s", a.Mode, d.Mode))
			}
			if a.Approvals != 0 && a.Approvals < d.Approvals {
				why = append(why, fmt.Sprintf("with default approve, its approvals %d are fewer than the default's %d", a.Approvals, d.Approvals))
			}
			if a.Timeout != 0 && a.Timeout > d.Timeout {
				why = append(why, fmt.Sprintf("with default approve, its timeout %s is longer than the default's %s", a.Timeout, d.Timeout))
			}
			if a.ValidFor != 0 && a.ValidFor > d.ValidFor {
				why = append(why, fmt.Sprintf("with default approve, its valid_for %s is longer than the default's %s", a.ValidFor, d.ValidFor))
			}
			if a.GrantsAllowed() && a.Grants != nil && !d.GrantsAllowed() {
				why = append(why, "with default approve, it allows grants, which the default forbids")
			}
		}
	}
	// The mode of a call that several approve rules match is the first
	// one's: this rule must not come before a kept approve rule with
	// another mode.
	mode := n.effective(r).Mode
	oIdx := ruleIndex(o)
	for k := j + 1; k < len(n.Rules); k++ {
		later := &n.Rules[k]
		if later.Effect != Approve {
			continue
		}
		if _, kept := oIdx[n.RuleName(k)]; !kept {
			continue
		}
		if m := n.effective(later).Mode; m != mode {
			why = append(why, fmt.Sprintf("it comes before rule %q, whose mode %s differs from its own %s", n.RuleName(k), m, mode))
		}
	}
	if len(why) > 0 {
		c.widens, c.why = true, strings.Join(why, "; ")
	}
	return c
}

// compareApproval compares two sets of approval parameters: raising
// approvals, shortening timeout or valid_for and turning grants off narrow;
// the opposite, and
// any change of mode or approvers, widen.
func compareApproval(label string, o, n Approval) []change {
	var out []change
	switch {
	case n.Approvals > o.Approvals:
		out = append(out, change{text: fmt.Sprintf("%s.approvals raised from %d to %d", label, o.Approvals, n.Approvals)})
	case n.Approvals < o.Approvals:
		out = append(out, change{text: fmt.Sprintf("%s.approvals lowered from %d to %d", label, o.Approvals, n.Approvals), widens: true, why: "fewer approvals count as widening"})
	}
	dur := func(key string, od, nd time.Duration) {
		switch {
		case nd < od:
			out = append(out, change{text: fmt.Sprintf("%s.%s shortened from %s to %s", label, key, od, nd)})
		case nd > od:
			out = append(out, change{text: fmt.Sprintf("%s.%s lengthened from %s to %s", label, key, od, nd), widens: true, why: "a longer " + key + " counts as widening"})
		}
	}
	dur("timeout", o.Timeout, n.Timeout)
	dur("valid_for", o.ValidFor, n.ValidFor)
	if o.Mode != n.Mode {
		out = append(out, change{text: fmt.Sprintf("%s.mode changed from %s to %s", label, o.Mode, n.Mode), widens: true, why: "any change of the waiting mode counts as widening"})
	}
	switch og, ng := o.GrantsAllowed(), n.GrantsAllowed(); {
	case og && !ng:
		out = append(out, change{text: fmt.Sprintf("%s.grants turned off", label)})
	case !og && ng:
		out = append(out, change{text: fmt.Sprintf("%s.grants turned on", label), widens: true, why: "allowing grants counts as widening"})
	}
	if !sameSet(o.Approvers, n.Approvers) {
		out = append(out, change{text: fmt.Sprintf("%s.approvers changed from %s to %s", label, approversText(o.Approvers), approversText(n.Approvers)), widens: true, why: "any change of who may approve counts as widening"})
	}
	return out
}

// ruleIndex maps each rule name of p (explicit or defaulted) to its index.
func ruleIndex(p *Policy) map[string]int {
	m := make(map[string]int, len(p.Rules))
	for i := range p.Rules {
		if _, dup := m[p.RuleName(i)]; !dup {
			m[p.RuleName(i)] = i
		}
	}
	return m
}

// sameSet reports whether a and b hold the same strings, ignoring order and
// repeats.
func sameSet(a, b []string) bool {
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	for _, s := range b {
		if !slices.Contains(a, s) {
			return false
		}
	}
	return true
}

func list(s []string) string {
	if len(s) == 0 {
		return "[] (any tool)"
	}
	return "[" + strings.Join(s, " ") + "]"
}

func approversText(s []string) string {
	if len(s) == 0 {
		return "[] (anyone with a reviewing role)"
	}
	return "[" + strings.Join(s, " ") + "]"
}

func quoted(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return "[" + strings.Join(q, " ") + "]"
}

func matchText(r *Rule) string {
	var b strings.Builder
	if r.Server != "" {
		fmt.Fprintf(&b, " server %q", r.Server)
	}
	if len(r.Tools) > 0 {
		fmt.Fprintf(&b, " tools %s", list(r.Tools))
	}
	b.WriteString(selectorText(r))
	if r.When != "" {
		fmt.Fprintf(&b, " when %q", r.When)
	}
	if r.Command != nil {
		fmt.Fprintf(&b, " command %s", commandText(r.Command))
	}
	if r.Annotations != nil {
		fmt.Fprintf(&b, " annotations %s", r.Annotations)
	}
	if len(r.Principals) > 0 {
		fmt.Fprintf(&b, " principals %s", list(r.Principals))
	}
	if r.Monitor != nil {
		fmt.Fprintf(&b, " monitor %v", *r.Monitor)
	}
	return b.String()
}

// hasSelector reports whether r has a when, command, annotations or
// principals selector.
func hasSelector(r *Rule) bool {
	return r.When != "" || r.Command != nil || r.Annotations != nil || len(r.Principals) > 0
}

// selectorChanges describes each selector that differs between o and n.
func selectorChanges(o, n *Rule) []string {
	var out []string
	if o.When != n.When {
		out = append(out, fmt.Sprintf("when changed from %q to %q", o.When, n.When))
	}
	if commandText(o.Command) != commandText(n.Command) {
		out = append(out, fmt.Sprintf("command changed from %s to %s", commandText(o.Command), commandText(n.Command)))
	}
	if !o.Annotations.equal(n.Annotations) {
		out = append(out, fmt.Sprintf("annotations changed from %s to %s", o.Annotations, n.Annotations))
	}
	if !sameSet(o.Principals, n.Principals) {
		out = append(out, fmt.Sprintf("principals changed from %s to %s", list(o.Principals), list(n.Principals)))
	}
	return out
}

func commandText(m *CommandMatch) string {
	if m == nil {
		return "none"
	}
	q := make([]string, len(m.Match))
	for i, s := range m.Match {
		q[i] = fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("{argument: %q, match: [%s]}", m.Argument, strings.Join(q, " "))
}

func approvalText(a *Approval) string {
	if a == nil {
		return ""
	}
	var parts []string
	if a.Approvals != 0 {
		parts = append(parts, fmt.Sprintf("approvals %d", a.Approvals))
	}
	if a.Timeout != 0 {
		parts = append(parts, "timeout "+a.Timeout.String())
	}
	if a.ValidFor != 0 {
		parts = append(parts, "valid_for "+a.ValidFor.String())
	}
	if a.Mode != "" {
		parts = append(parts, "mode "+a.Mode)
	}
	if len(a.Approvers) > 0 {
		parts = append(parts, "approvers "+approversText(a.Approvers))
	}
	if a.Grants != nil {
		parts = append(parts, fmt.Sprintf("grants %t", *a.Grants))
	}
	if len(parts) == 0 {
		return ""
	}
	return ", " + strings.Join(parts, ", ")
}

func chatText(r *Rule) string {
	if r.ChatApproval {
		return ", chat_approval"
	}
	return ""
}

func article(e Effect) string {
	if e == Allow || e == Approve {
		return "n"
	}
	return ""
}

// Revision returns the revision of p, a digest of its content: "sha256:"
// followed by the lowercase hex SHA-256 of a canonical JSON encoding of p
// with rule names defaulted (rule[<i>]), durations in nanoseconds, a rule
// approval whose fields are all zero treated as absent, and Source left
// out. Policies that decide alike field by field get the same revision,
// whatever the YAML looked like, so instances reading the same file agree.
// Order of rules, tools and approvers is kept (it is part of the content).
func Revision(p *Policy) string {
	type wireApproval struct {
		Timeout   int64    `json:"timeout_ns"`
		Mode      string   `json:"mode"`
		Approvals int      `json:"approvals"`
		Approvers []string `json:"approvers"`
		ValidFor  int64    `json:"valid_for_ns"`
		// Grants (added later) is omitted when unset.
		Grants *bool `json:"grants,omitempty"`
	}
	// Fields added after the first release are omitted when unset, so a
	// policy that does not use them keeps its revision.
	type wireRule struct {
		Name         string              `json:"name"`
		Server       string              `json:"server"`
		Tools        []string            `json:"tools"`
		Effect       string              `json:"effect"`
		Approval     *wireApproval       `json:"approval"`
		When         string              `json:"when,omitempty"`
		Command      *CommandMatch       `json:"command,omitempty"`
		Annotations  *AnnotationSelector `json:"annotations,omitempty"`
		Principals   []string            `json:"principals,omitempty"`
		Monitor      *bool               `json:"monitor,omitempty"`
		ChatApproval bool                `json:"chat_approval,omitempty"`
		// Issue 10's selectors.
		Resources []string `json:"resources,omitempty"`
		Prompts   []string `json:"prompts,omitempty"`
	}
	type wirePolicy struct {
		Default    string        `json:"default"`
		Approval   *wireApproval `json:"approval"`
		Rules      []wireRule    `json:"rules"`
		Enforce    *bool         `json:"enforce,omitempty"`
		ListDenied bool          `json:"list_denied,omitempty"`
	}
	ap := func(a Approval) *wireApproval {
		return &wireApproval{Timeout: int64(a.Timeout), Mode: a.Mode, Approvals: a.Approvals, Approvers: nonNil(a.Approvers), ValidFor: int64(a.ValidFor), Grants: a.Grants}
	}
	w := wirePolicy{Default: string(p.Default), Approval: ap(p.Approval), Rules: []wireRule{}, ListDenied: p.ListDenied}
	if p.Approval.GrantsAllowed() {
		w.Approval.Grants = nil // grants: true is the default's own value
	}
	if !p.Enforced() {
		w.Enforce = p.Enforce
	}
	for i := range p.Rules {
		r := &p.Rules[i]
		wr := wireRule{Name: p.RuleName(i), Server: r.Server, Tools: nonNil(r.Tools), Effect: string(r.Effect),
			When: r.When, Command: r.Command, Principals: r.Principals, Monitor: r.Monitor, ChatApproval: r.ChatApproval,
			Resources: r.Resources, Prompts: r.Prompts}
		if r.Annotations != nil && !r.Annotations.empty() {
			wr.Annotations = r.Annotations
		}
		if a := r.Approval; a != nil && (a.Timeout != 0 || a.Mode != "" || a.Approvals != 0 || len(a.Approvers) > 0 || a.ValidFor != 0 || a.Grants != nil) {
			wr.Approval = ap(*a)
		}
		w.Rules = append(w.Rules, wr)
	}
	b, err := json.Marshal(w)
	if err != nil {
		panic(fmt.Sprintf("policy: encode revision: %v", err)) // plain strings and numbers cannot fail
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
