package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"cel.dev/cel-go/cel"
)

// An Evaluator is a policy compiled for evaluation, once per revision: its
// globs, conditions and command patterns are compiled, and the rules that
// can match a (server, tool) pair by name are looked up in an index built
// on first use of the pair. Its methods are safe for concurrent use. The
// Policy it was compiled from must not be modified afterwards.
//
// Evaluation allocates nothing beyond the Decision (its Matched list and
// approvers) unless a candidate rule has a When or Command selector, in
// which case the call's arguments are decoded once for all of them.
type Evaluator struct {
	p        *Policy
	revision string
	rules    []crule
	// byServer lists, per exact server name in the rules, the rules with
	// that server, in file order; anyServer the rules with no server or a
	// server glob.
	byServer  map[string][]int32
	anyServer []int32
	// names caches the rules that match a (server, tool) pair by name;
	// written under namesMu, copied on write, read without a lock.
	names   atomic.Pointer[map[nameKey][]int32]
	namesMu sync.Mutex
	// grants compiles grant predicates (grant.go).
	grants grantCEL
}

// nameKey is what the name index is keyed by: the kind, the real server
// and the real name of what a call uses.
type nameKey struct {
	kind         Kind
	server, name string
}

// maxNames bounds the name index; pairs beyond it are scanned on every
// call (still correct, only slower). Calls name configured servers and
// their tools, so real deployments stay far below it.
const maxNames = 8192

// crule is a compiled rule.
type crule struct {
	name      string
	index     int
	effect    Effect
	monitored bool // only deny and approve rules can be
	argDep    bool

	serverAny   bool
	serverExact string
	serverGlob  glob // when serverExact is "" and !serverAny
	serverSrc   string
	toolsAny    bool
	tools       []glob
	toolSrcs    []string // the source of each of tools
	// resources and prompts select the other kinds (issue 10); a rule that
	// names none of tools, resources and prompts selects everything.
	resources, prompts nameSel

	when        *condition
	command     *commandMatcher
	annotations *AnnotationSelector
	ids, groups []string // principals; both empty: any principal

	approval Approval // effective parameters of an approve rule
}

// Compile compiles p for evaluation and computes its revision
// ([Revision]). It fails when p cannot be evaluated: an invalid default or
// rule effect, a glob, condition or command pattern that does not compile.
// It does not check what only [Policy.Validate] checks (approval
// parameters, rule names).
func Compile(p *Policy) (*Evaluator, error) {
	return compile(p, Revision(p))
}

func compile(p *Policy, revision string) (*Evaluator, error) {
	var errs []error
	if !p.Default.Valid() {
		errs = append(errs, fmt.Errorf("policy default %q: want allow, deny or approve", p.Default))
	}
	env, envErr := envFor(p)
	e := &Evaluator{p: p, revision: revision, byServer: map[string][]int32{}}
	for i := range p.Rules {
		r, rerrs := compileRule(p, i, env, envErr)
		for _, err := range rerrs {
			errs = append(errs, fmt.Errorf("policy %s: %w", ruleLabel(p, i), err))
		}
		e.rules = append(e.rules, r)
		switch {
		case r.serverAny || r.serverExact == "":
			e.anyServer = append(e.anyServer, int32(i))
		default:
			e.byServer[r.serverExact] = append(e.byServer[r.serverExact], int32(i))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return e, nil
}

// envFor returns the CEL environment when some rule of p has a When.
func envFor(p *Policy) (*cel.Env, error) {
	if !slices.ContainsFunc(p.Rules, func(r Rule) bool { return r.When != "" }) {
		return nil, nil
	}
	return newCELEnv()
}

// compileRule compiles rule i of p; errs lists every problem (effect,
// server, tools, when, command, annotations, principals, monitor), without
// the rule's label.
func compileRule(p *Policy, i int, env *cel.Env, envErr error) (crule, []error) {
	r := &p.Rules[i]
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	c := crule{name: p.RuleName(i), index: i, effect: r.Effect, argDep: r.ArgumentDependent(), serverSrc: r.Server}
	if !r.Effect.Valid() {
		add("effect %q: want allow, deny or approve", r.Effect)
	}
	switch {
	case r.Server == "":
		c.serverAny = true
	case !IsGlob(r.Server):
		c.serverExact = r.Server
	default:
		g, err := compileGlob(r.Server)
		if err != nil {
			add("server: %w", err)
		}
		c.serverGlob = g
	}
	namesKind := len(r.Tools) > 0 || len(r.Resources) > 0 || len(r.Prompts) > 0
	c.toolsAny = !namesKind
	c.resources.any, c.prompts.any = !namesKind, !namesKind
	for _, sel := range []struct {
		what string
		pats []string
		into *nameSel
	}{{"resources", r.Resources, &c.resources}, {"prompts", r.Prompts, &c.prompts}} {
		for k, pat := range sel.pats {
			if pat == "" {
				sel.into.any = true
				continue
			}
			g, err := compileGlob(pat)
			if err != nil {
				add("%s[%d]: %w", sel.what, k, err)
				continue
			}
			sel.into.globs = append(sel.into.globs, g)
			sel.into.srcs = append(sel.into.srcs, pat)
		}
	}
	for k, t := range r.Tools {
		if t == "" {
			c.toolsAny = true
			continue
		}
		g, err := compileGlob(t)
		if err != nil {
			add("tools[%d]: %w", k, err)
			continue
		}
		c.tools = append(c.tools, g)
		c.toolSrcs = append(c.toolSrcs, t)
	}
	if r.When != "" {
		switch {
		case envErr != nil:
			add("when: %w", envErr)
		default:
			cond, err := compileCondition(env, r.When)
			if err != nil {
				add("when: %w", err)
			}
			c.when = cond
		}
	}
	if r.Command != nil {
		cm, cerrs := compileCommand(r.Command)
		for _, err := range cerrs {
			add("command.%w", err)
		}
		c.command = cm
	}
	if r.Annotations != nil {
		if r.Annotations.empty() {
			add("annotations: select at least one of read_only, destructive, idempotent, open_world")
		}
		c.annotations = r.Annotations
	}
	for k, s := range r.Principals {
		switch g, isGroup := strings.CutPrefix(s, GroupPrefix); {
		case strings.TrimSpace(s) == "" || strings.TrimSpace(s) != s:
			add("principals[%d] %q: empty or padded with spaces", k, s)
		case isGroup && g == "":
			add("principals[%d] %q: group name is empty", k, s)
		case isGroup:
			c.groups = append(c.groups, g)
		default:
			c.ids = append(c.ids, s)
		}
	}
	if r.Monitor != nil && r.Effect == Allow {
		add("monitor: only deny and approve rules have a monitor mode")
	}
	c.monitored = r.Effect != Allow && p.monitored(r)
	if r.Effect == Approve {
		c.approval = p.effective(r)
	}
	return c, errs
}

// Policy returns the policy e was compiled from. Do not modify it.
func (e *Evaluator) Policy() *Policy { return e.p }

// Revision returns the revision of the compiled policy ([Revision]), or ""
// when it was compiled without one.
func (e *Evaluator) Revision() string { return e.revision }

// byName returns the indices of the rules whose server and selectors
// match what a call of kind uses (server, name), in file order.
func (e *Evaluator) byName(kind Kind, server, name string) []int32 {
	if kind == "" {
		kind = KindTool
	}
	key := nameKey{kind, server, name}
	if m := e.names.Load(); m != nil {
		if c, ok := (*m)[key]; ok {
			return c
		}
	}
	c := e.scan(kind, server, name)
	e.namesMu.Lock()
	defer e.namesMu.Unlock()
	old := e.names.Load()
	if old != nil && len(*old) >= maxNames {
		return c
	}
	next := make(map[nameKey][]int32, 1+lenOf(old))
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	next[key] = c
	e.names.Store(&next)
	return c
}

func lenOf(m *map[nameKey][]int32) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// scan merges the rules of server's index entry with the rules for any
// server, in file order, keeping those whose names match.
func (e *Evaluator) scan(kind Kind, server, name string) []int32 {
	exact := e.byServer[server]
	anyS := e.anyServer
	out := []int32{}
	for len(exact) > 0 || len(anyS) > 0 {
		var i int32
		if len(anyS) == 0 || (len(exact) > 0 && exact[0] < anyS[0]) {
			i, exact = exact[0], exact[1:]
		} else {
			i, anyS = anyS[0], anyS[1:]
		}
		if e.rules[i].matchesName(kind, server, name) {
			out = append(out, i)
		}
	}
	return slices.Clip(out)
}

func (r *crule) matchesName(kind Kind, server, name string) bool {
	switch {
	case r.serverAny:
	case r.serverExact != "":
		if r.serverExact != server {
			return false
		}
	default:
		if !r.serverGlob.match(server) {
			return false
		}
	}
	switch kind {
	case KindResource:
		return r.resources.match(name)
	case KindPrompt:
		return r.prompts.match(name)
	}
	if r.toolsAny {
		return true
	}
	for _, g := range r.tools {
		if g.match(name) {
			return true
		}
	}
	return false
}

// A nameSel is a rule's selector of one kind's names: any name, or names
// matching one of the globs.
type nameSel struct {
	any   bool
	globs []glob
	srcs  []string // the source of each of globs
}

func (s *nameSel) match(name string) bool {
	if s.any {
		return true
	}
	for _, g := range s.globs {
		if g.match(name) {
			return true
		}
	}
	return false
}

// principalMatches reports whether the rule's principals select p.
func (r *crule) principalMatches(p *Principal) bool {
	if len(r.ids) == 0 && len(r.groups) == 0 {
		return true
	}
	if slices.Contains(r.ids, p.ID) {
		return true
	}
	for _, g := range r.groups {
		if slices.Contains(p.Groups, g) {
			return true
		}
	}
	return false
}

// lazyState makes the callState of an evaluation on first use, so that a
// call that no argument-dependent rule looks at allocates nothing for it;
// or takes it from Call.Decoded.
type lazyState struct {
	s   *callState
	d   *Decoded // s's, handed back as Decision.Decoded
	raw json.RawMessage
	ann *Annotations
}

// lazyFor is the lazyState of an evaluation of c: c.Decoded's state when
// that was decoded from the same argument bytes (the annotations' value
// is made again when c's annotations are another's).
func lazyFor(c *Call) lazyState {
	ls := lazyState{raw: c.Arguments, ann: c.Annotations}
	if d := c.Decoded; d != nil && bytes.Equal(d.st.raw, c.Arguments) {
		if d.st.ann != c.Annotations {
			d.st.ann, d.st.annVal = c.Annotations, nil
		}
		ls.d, ls.s = d, &d.st
	}
	return ls
}

func (l *lazyState) get() *callState {
	if l.s == nil {
		l.d = &Decoded{st: callState{raw: l.raw, ann: l.ann}}
		l.s = &l.d.st
	}
	return l.s
}

// Decoded is what an evaluation decoded of a call to decide it: the
// arguments as conditions read them, the command a command selector
// parsed, the annotations' value ([Decision.Decoded]). Given back as
// [Call.Decoded] to an evaluation of the same call, it spares that
// evaluation decoding them again. Not safe for concurrent use.
type Decoded struct{ st callState }

// callState holds what one evaluation decoded, so that several rules share
// it: the arguments, the annotations' CEL value, and parsed commands.
type callState struct {
	raw     json.RawMessage
	ann     *Annotations
	decoded bool
	argsMap map[string]any
	argsErr error
	annVal  map[string]any
	cmdArg  string
	cmd     *parsedCommand
	cmdErr  error
}

func (st *callState) args() (map[string]any, error) {
	if !st.decoded {
		st.decoded = true
		st.argsMap, st.argsErr = decodeArgs(st.raw)
	}
	return st.argsMap, st.argsErr
}

func (st *callState) annotations() map[string]any {
	if st.annVal == nil {
		st.annVal = annotationValues(st.ann)
	}
	return st.annVal
}

// command returns the parsed command held by string argument name.
func (st *callState) command(name string) (*parsedCommand, error) {
	if st.cmd != nil && st.cmdArg == name || st.cmdErr != nil && st.cmdArg == name {
		return st.cmd, st.cmdErr
	}
	st.cmdArg, st.cmd, st.cmdErr = name, nil, nil
	m, err := st.args()
	if err != nil {
		st.cmdErr = err
		return nil, err
	}
	v, ok := m[name]
	if !ok {
		st.cmdErr = fmt.Errorf("the command argument %q is missing", name)
		return nil, st.cmdErr
	}
	s, ok := v.(string)
	if !ok {
		st.cmdErr = fmt.Errorf("the command argument %q is not a string", name)
		return nil, st.cmdErr
	}
	pc := parseCommand(s)
	pc.checkEnvArgs(m, name)
	st.cmd = &pc
	return st.cmd, nil
}

// matches decides rule r for c. Every selector must hold; a selector that
// cannot be decided (an error, unknown annotations) takes the strict
// reading: it fails for an allow rule and holds for a deny or approve rule.
// tainted reports a match that relied on the strict reading (see decide).
// unseen reports a match of a deny or approve rule's command selector on
// a command the matcher cannot read in full (parsedCommand.Opaque).
// err reports the first error met, whatever the outcome.
func (r *crule) matches(c *Call, ls *lazyState) (ok, tainted, unseen bool, err error) {
	strict := r.effect != Allow
	if !r.principalMatches(&c.Principal) {
		return false, false, false, nil
	}
	if r.annotations != nil {
		if c.Annotations == nil {
			if !strict {
				return false, false, false, nil
			}
			tainted = true
		} else if ok, _ := r.annotations.holds(c.Annotations); !ok {
			return false, false, false, nil
		}
	}
	if r.command != nil {
		pc, cerr := ls.get().command(r.command.argument)
		switch {
		case cerr != nil && !strict:
			return false, false, false, cerr
		case cerr != nil:
			err, tainted = cerr, true
		case !strict && !r.command.allows(pc).match:
			return false, false, false, nil
		case strict:
			v := r.command.catches(pc)
			if !v.match {
				return false, false, false, nil
			}
			unseen = v.unseen
		}
	}
	if r.when != nil {
		ok, werr := r.when.eval(&activation{c: *c, st: ls.get()})
		switch {
		case werr != nil && !strict:
			return false, false, false, werr
		case werr != nil:
			tainted = true
			if err == nil {
				err = werr
			}
		case !ok:
			return false, false, false, err
		}
	}
	return true, tainted, unseen, err
}

// Evaluate decides c (see [Policy.Evaluate] for the precedence and how
// approve rules combine). Rules in monitor mode do not take part in the
// decision; when they would have made it stricter, Decision.Monitor says
// so. When the decision is approve (and someone could approve it) and
// c.Grants holds a grant that matches ([Evaluator.MatchGrant]; tool calls
// only), the decision is allow with Decision.Grant naming it: deny > grant
// > approve. The error is nil unless c.Kind is not a kind (then the
// decision is deny): a compiled policy cannot fail to evaluate (selector
// errors are in Decision.Errors).
func (e *Evaluator) Evaluate(c Call) (Decision, error) {
	if !c.Kind.Valid() {
		return Decision{Effect: Deny, Rule: DefaultRule, Revision: e.revision}, fmt.Errorf("policy: call kind %q: want tool, resource or prompt", c.Kind)
	}
	ls := lazyFor(&c)
	var buf, tbuf, ubuf [16]int32
	matched, tainted, unseen := buf[:0], tbuf[:0], ubuf[:0]
	var errs []RuleError
	for _, i := range e.byName(c.Kind, c.Server, c.Name()) {
		r := &e.rules[i]
		ok, t, u, err := r.matches(&c, &ls)
		if err != nil {
			errs = append(errs, RuleError{Rule: r.name, Err: err})
		}
		if ok {
			matched = append(matched, i)
		}
		if ok && t {
			tainted = append(tainted, i)
		}
		if ok && u {
			unseen = append(unseen, i)
		}
	}
	d := e.decide(matched, tainted)
	for _, i := range unseen {
		if e.rules[i].name == d.Rule {
			d.Unseen = true
		}
	}
	if d.Effect == Approve && !d.NoEligibleApprovers && len(c.Grants) > 0 {
		id, gerrs := e.matchGrant(&c, &ls, d.Approval)
		errs = append(errs, gerrs...)
		if id != "" {
			d.Effect, d.Grant = Allow, id
		}
	}
	d.Errors = errs
	d.Decoded = ls.d
	return d, nil
}

// decide turns the matching rules (indices in file order) into a Decision.
// tainted lists the matches that relied on the strict reading of an
// unknown or erroring selector: such a match may make the decision
// stricter but never less strict than it would be without the rule (a
// tainted approve rule cannot turn the default's deny into a hold).
func (e *Evaluator) decide(matched, tainted []int32) Decision {
	d := Decision{Revision: e.revision}
	if len(matched) > 0 {
		d.Matched = make([]string, len(matched))
		for k, i := range matched {
			d.Matched[k] = e.rules[i].name
		}
	}
	// The enforced decision, then what everything enforced would decide.
	effect, rule := e.strictPick(matched, tainted, false)
	would, wouldRule := e.strictPick(matched, tainted, true)
	d.Effect, d.Rule = effect, rule
	if rule == DefaultRule && !e.p.Enforced() {
		d.Effect = Allow // the default is in monitor mode too
	}
	if d.Effect == Approve {
		if rule == DefaultRule {
			d.Approval = e.p.Approval
			d.Approval.Approvers = slices.Clone(e.p.Approval.Approvers)
			d.TimeoutRule = DefaultRule
		} else {
			d.Approval, d.NoEligibleApprovers, d.TimeoutRule = e.combine(matched)
		}
	}
	switch {
	case would == Deny && d.Effect != Deny:
		d.Monitor = Monitor{Verdict: WouldDeny, Rule: wouldRule}
	case would == Approve && d.Effect == Allow:
		d.Monitor = Monitor{Verdict: WouldHold, Rule: wouldRule}
	}
	return d
}

// strictPick is pick, made no less strict by the tainted matches: when
// they make the outcome approve but the outcome without them is the
// default's deny, the deny stands.
func (e *Evaluator) strictPick(matched, tainted []int32, all bool) (Effect, string) {
	eff, rule := e.pick(matched, nil, all)
	if eff != Approve || len(tainted) == 0 {
		return eff, rule
	}
	if e2, r2 := e.pick(matched, tainted, all); e2 == Deny && (all || e.p.Enforced()) {
		return e2, r2
	}
	return eff, rule
}

// pick applies the precedence deny > approve > allow > default to the
// matching rules not in skip, counting monitored ones only when all is
// set.
func (e *Evaluator) pick(matched, skip []int32, all bool) (Effect, string) {
	for _, eff := range [...]Effect{Deny, Approve, Allow} {
		for _, i := range matched {
			r := &e.rules[i]
			if r.effect == eff && (all || !r.monitored) && !slices.Contains(skip, i) {
				return eff, r.name
			}
		}
	}
	return e.p.Default, DefaultRule
}

// combine merges the approval parameters of the matching enforced approve
// rules in file order: the largest Approvals, the shortest Timeout and
// ValidFor, the first Mode, Grants false when any rule's is, and the intersection of the non-empty
// Approvers lists (an empty intersection sets the second result). The
// third is the name of the rule whose Timeout applies (the first with the
// shortest).
func (e *Evaluator) combine(matched []int32) (Approval, bool, string) {
	var out Approval
	var timeoutRule string
	seen := false
	narrowed := false // out.Approvers holds a real (non-"anyone") list
	for _, i := range matched {
		r := &e.rules[i]
		if r.effect != Approve || r.monitored {
			continue
		}
		a := &r.approval
		if !seen {
			out, seen, timeoutRule = *a, true, r.name
			out.Approvers = dedupe(a.Approvers)
			narrowed = len(out.Approvers) > 0
			continue
		}
		out.Approvals = max(out.Approvals, a.Approvals)
		if a.Timeout < out.Timeout {
			out.Timeout, timeoutRule = a.Timeout, r.name
		}
		out.ValidFor = min(out.ValidFor, a.ValidFor)
		if !a.GrantsAllowed() {
			out.Grants = a.Grants // any rule that forbids grants forbids them
		}
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
		return out, true, timeoutRule
	}
	return out, false, timeoutRule
}

// DeniedRegardless reports whether the policy denies c whatever its
// arguments, and the deciding rule: an enforced deny rule without When or
// Command selects it, or no enforced allow or approve rule can select it
// and the enforced default is deny. c.Arguments is ignored. This is the
// test for hiding a tool (or another item named like one) from a caller's
// lists (policy.list_denied: false); an argument-dependent deny keeps the
// item listed, since the call may still be allowed.
func (e *Evaluator) DeniedRegardless(c Call) (bool, string) {
	nonDeny := false
	if !c.Kind.Valid() {
		return true, DefaultRule
	}
	for _, i := range e.byName(c.Kind, c.Server, c.Name()) {
		r := &e.rules[i]
		if r.monitored || !r.principalMatches(&c.Principal) {
			continue
		}
		if r.annotations != nil {
			if c.Annotations == nil {
				if r.effect != Deny {
					// The strict reading: an allow never selects it, and an
					// approve selecting it only through the strict reading
					// cannot lift a deny.
					continue
				}
			} else if ok, _ := r.annotations.holds(c.Annotations); !ok {
				continue
			}
		}
		switch {
		case r.effect != Deny:
			nonDeny = true // it may select the call (for some arguments)
		case !r.argDep:
			return true, r.name
		}
	}
	if !nonDeny && e.p.Default == Deny && e.p.Enforced() {
		return true, DefaultRule
	}
	return false, ""
}

// Listed reports whether lists show the item c names to c's caller: with
// policy.list_denied always, else unless [Evaluator.DeniedRegardless].
func (e *Evaluator) Listed(c Call) bool {
	if e.p.ListDenied {
		return true
	}
	denied, _ := e.DeniedRegardless(c)
	return !denied
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
